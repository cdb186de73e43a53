/**
 * The hub as a C2SP tlog-witness (docs/transparency.md#the-hub-as-a-witness), on the main listener; its submission
 * prefix is <PUBLIC_URL>/tlog:
 *   POST /tlog/add-checkpoint   old size, consistency proof, signed checkpoint → cosignature line (c2sp.org/tlog-witness)
 *   GET  /tlog/witness-key      the witness's cosignature verifier key, text/plain
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError } from '../../../core/errors';
import { ERROR_BODY } from '../../response-docs';
import type { TlogWitness } from '../../../services/tlog/witness';

/** An old size line, 63 proof lines and a checkpoint with a few dozen signatures, post-quantum ones included. */
const ADD_CHECKPOINT_BODY_LIMIT = 128 * 1024;

const text = (type: string, description: string) => ({ description, content: { [type]: { schema: z.string() } } });
/**
 * An add-checkpoint body as c2sp.org/tlog-witness and tlog-checkpoint spell it: `old <size>`, at most 63 base64
 * hashes, a blank line, then the checkpoint note (origin, size, base64 root, extension lines, a blank line, and its
 * signature lines `— <name> <base64>`), with no control character but the line feeds.
 */
const ADD_CHECKPOINT_GRAMMAR =
  '^old (0|[1-9][0-9]{0,15})\\n([A-Za-z0-9+/]{43}=\\n){0,63}\\n[^\\n\\x00-\\x1f\\x7f]+\\n(0|[1-9][0-9]{0,15})\\n' +
  '[A-Za-z0-9+/]{43}=\\n([^\\n\\x00-\\x1f\\x7f]+\\n)*\\n(\\u2014 [^\\s+\\x00-\\x1f\\x7f]+ [A-Za-z0-9+/]{8,}={0,2}\\n)+$';
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export const tlogWitnessRoutes: FastifyPluginAsyncZod<{ witness: TlogWitness }> = async (app, { witness }) => {
  // The body is text (C2SP: a sequence of lines), taken as bytes so that invalid UTF-8 is refused, not replaced.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(
    'text/plain',
    { parseAs: 'buffer', bodyLimit: ADD_CHECKPOINT_BODY_LIMIT },
    (_request, body, done) => {
      try {
        done(null, utf8.decode(body as Buffer));
      } catch {
        done(new AppError('invalid_utf8', 'The body is not valid UTF-8'), undefined);
      }
    }
  );

  // Any other media type, JSON included, is refused here rather than parsed and then refused by the schema.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('*', (_request, _payload, done) =>
    done(new AppError('unsupported_media_type', 'Send the body as text/plain (c2sp.org/tlog-witness)'), undefined)
  );

  app.post(
    '/tlog/add-checkpoint',
    {
      config: { auth: 'none' },
      bodyLimit: ADD_CHECKPOINT_BODY_LIMIT,
      schema: {
        body: z
          .string()
          // The grammar, for clients and generated tests (core/tlog/add-checkpoint.node.ts checks it and names the
          // rule a body breaks, which a pattern check here would not).
          .meta({ pattern: ADD_CHECKPOINT_GRAMMAR })
          .describe('old <size>, consistency proof lines (base64), a blank line, the signed checkpoint'),
        // The one media type taken (the parsers above refuse any other with 415), as the OpenAPI document says.
        consumes: ['text/plain'],
        response: {
          200: text('text/plain', "The witness's cosignature line(s) on the checkpoint (c2sp.org/tlog-cosignature)"),
          403: ERROR_BODY.describe(
            "The checkpoint carries no signature that verifies with a key of the log's origin (c2sp.org/tlog-witness)"
          ),
          409: text('text/x.tlog.size', 'The old size is not the size last cosigned for that log: that size'),
          422: ERROR_BODY.describe(
            'checkpoint_inconsistent: the consistency proof does not verify from the last root cosigned; checkpoint_fork: the size cosigned, with another root'
          )
        }
      }
    },
    async (request, reply) => {
      const result = await witness.addCheckpoint(request.body, request.log);
      if (!result.cosigned) return reply.code(409).type('text/x.tlog.size').send(`${result.latestSize}\n`);
      return reply.type('text/plain; charset=utf-8').send(result.lines);
    }
  );

  app.get(
    '/tlog/witness-key',
    {
      config: { auth: 'none' },
      schema: {
        response: { 200: text('text/plain', 'The cosignature verifier key: <name>+<key id hex>+<base64 0x04||key>') }
      }
    },
    async (_request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .header('Cache-Control', 'public, max-age=300')
        .send(`${witness.verifierKey}\n`)
  );
};
