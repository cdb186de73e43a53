/**
 * GET /api/sub-l0: the L0 subscription, i.e. raw ledger entries after a cursor.
 *   JSON (default): { ok, after, next_cursor, entries }, at most `limit` entries.
 *   SSE (Accept: text/event-stream): every entry after the cursor, then each new one as it is appended, as
 *   `id: <seq>` / `event: entry` / `data: <entry JSON>`; a reconnecting client's Last-Event-ID resumes the stream.
 * New entries are found by polling the ledger (every SUBSCRIPTION_POLL_MS), so appends made by any API process
 * are delivered.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { eventStreams } from '../../event-stream';
import { sseEvent } from '../../response-docs';
import { queryInt } from '../../../core/identifiers';
import { publicEntry, publicEntrySchema } from '../../../core/ledger/ledger-entry';
import type { Ledger } from '../../../store/ledger/ledger';
import { stringifyJson } from '../../plugins/json-body';

const POLL_MS = 500;

const pageResponse = z.object({
  ok: z.literal(true),
  after: z.number().int(),
  next_cursor: z.number().int(),
  entries: z.array(publicEntrySchema)
});

export const subscriptionRoutes: FastifyPluginAsyncZod<{ ledger: Ledger }> = async (app, { ledger }) => {
  // Streams never finish by themselves: the server's close ends them.
  const streams = eventStreams(app);

  app.get(
    '/api/sub-l0',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'zhongshu_truth_api',
          summary: 'L0 subscription: entries after a cursor, as JSON or an SSE stream'
        }
      },
      schema: {
        querystring: z.object({ after: queryInt(0).default(0), limit: queryInt(1, 500).default(100) }),
        response: {
          200: {
            description:
              'Entries after the cursor: a JSON page, or with Accept: text/event-stream an SSE stream that stays open',
            content: {
              'application/json': { schema: pageResponse },
              'text/event-stream': { schema: sseEvent('a ledger entry as JSON (event: entry, id: its seq)') }
            }
          }
        }
      }
    },
    async (request, reply) => {
      const query = request.query;
      const lastEventId = Number(request.headers['last-event-id']);
      const after = Number.isInteger(lastEventId) && lastEventId > query.after ? lastEventId : query.after;
      if (!String(request.headers.accept ?? '').includes('text/event-stream')) {
        const entries = (await ledger.after(after, query.limit)).map(publicEntry);
        return {
          ok: true as const,
          after,
          next_cursor: entries.length ? entries[entries.length - 1]!.seq : after,
          entries
        };
      }

      const sse = streams.open(request, reply);
      sse.write(`retry: 2000\n\n`);
      let cursor = after;
      while (sse.isOpen()) {
        try {
          const batch = await ledger.after(cursor, 200);
          for (const doc of batch) {
            sse.write(`id: ${doc.seq}\nevent: entry\ndata: ${stringifyJson(publicEntry(doc))}\n\n`);
            cursor = doc.seq;
          }
          if (batch.length === 200) continue;
        } catch (err) {
          request.log.warn({ err }, 'sub-l0 poll failed; retrying');
        }
        sse.keepAlive();
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      sse.end();
    }
  );
};
