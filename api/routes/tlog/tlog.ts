/**
 * The ledger as a C2SP transparency log (docs/transparency.md), on the main listener under /tlog:
 *   GET /tlog/checkpoint            the signed checkpoint (c2sp.org/tlog-checkpoint), text/plain
 *   GET /tlog/verifier-key          the verifier key of the checkpoints (note.NewVerifier's argument), text/plain
 *   GET /tlog/tile/<L>/<N>[.p/<W>]  hash tiles, and /tlog/tile/entries/<N>[.p/<W>] entry bundles (c2sp.org/tlog-tiles)
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { parseTilePath } from '../../../core/tlog/tiles';
import type { TlogCheckpoints } from '../../../services/tlog/checkpoint';
import type { TlogTiles } from '../../../services/tlog/tiles';
import { ERROR_BODY } from '../../response-docs';

const text = (description: string) => ({ description, content: { 'text/plain': { schema: z.string() } } });
const octets = (description: string) => ({
  description,
  content: {
    'application/octet-stream': {
      schema: z.custom<Buffer>((v) => Buffer.isBuffer(v), 'bytes').meta({ type: 'string', format: 'binary' })
    }
  }
});

/**
 * A tile's path as C2SP tlog-tiles spells it, for the schema (clients and generated tests): level 0-63 or `entries`,
 * the index as 3-digit elements (all but the last prefixed with x; at most five, past any tree's size), a partial
 * width of 1-255. parseTilePath checks the same, and says which part is wrong.
 */
const TILE_PATH = z
  .string()
  .max(200)
  .regex(
    /^(entries|[0-9]|[1-5][0-9]|6[0-3])\/(x[0-9]{3}\/){0,4}[0-9]{3}(\.p\/([1-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5]))?$/,
    'a tile path: <L>/<N>[.p/<W>] or entries/<N>[.p/<W>], N as 3-digit elements (1234067: x001/x234/067)'
  );

export const tlogRoutes: FastifyPluginAsyncZod<{ tiles: TlogTiles; checkpoints: TlogCheckpoints }> = async (
  app,
  { tiles, checkpoints }
) => {
  app.get(
    '/tlog/checkpoint',
    {
      config: { auth: 'none' },
      schema: {
        response: {
          200: text(
            "The C2SP checkpoint: origin, tree size, base64 root, the hub's signature, then its witnesses' cosignatures"
          )
        }
      }
    },
    async (request, reply) => {
      const note = await checkpoints.served(request.log);
      return reply.type('text/plain; charset=utf-8').header('Cache-Control', 'no-cache').send(note);
    }
  );

  app.get(
    '/tlog/verifier-key',
    {
      config: { auth: 'none' },
      schema: { response: { 200: text('The checkpoint verifier key: <origin>+<key id hex>+<base64 0x01||key>') } }
    },
    async (_request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .header('Cache-Control', 'public, max-age=300')
        .send(`${checkpoints.verifierKey}\n`)
  );

  app.get(
    '/tlog/tile/*',
    {
      config: { auth: 'none' },
      schema: {
        params: z.object({ '*': TILE_PATH.describe('<L>/<N>[.p/<W>] or entries/<N>[.p/<W>]') }),
        response: {
          200: octets('A hash tile (concatenated 32-byte hashes) or an entry bundle (uint16-length entries)')
        }
      }
    },
    async (request, reply) => {
      const tile = await tiles.read(parseTilePath(request.params['*']));
      return reply
        .type('application/octet-stream')
        .header('Cache-Control', tile.full ? 'public, max-age=31536000, immutable' : 'public, max-age=1')
        .send(tile.bytes);
    }
  );
};
