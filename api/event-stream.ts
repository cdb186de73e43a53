/**
 * Server-Sent Events answers that stay open (GET /api/sub-l0, the A2A binding's streams): the reply is hijacked and
 * written as `text/event-stream` with proxies told not to buffer, a comment line keeps an idle stream alive through
 * proxies, and every stream a plugin opened is ended when the server closes, so shutdown can drain.
 * (The chat gateway writes its own headers: it forwards an upstream's stream and its rate-limit headers.)
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

const KEEPALIVE_MS = 15_000;

export interface EventStream {
  /** False once the client has gone or the stream was ended. */
  isOpen(): boolean;
  /** Writes SSE text (one or more complete events). */
  write(text: string): void;
  /** Writes a comment line when nothing was written for KEEPALIVE_MS. */
  keepAlive(): void;
  end(): void;
}

/** One per plugin: `open` starts a stream that the server's close ends. */
export function eventStreams(app: FastifyInstance): {
  open(request: FastifyRequest, reply: FastifyReply): EventStream;
} {
  const open = new Set<FastifyReply>();
  app.addHook('preClose', async () => {
    for (const reply of open) reply.raw.end();
  });
  return {
    open(request, reply) {
      reply.hijack();
      reply.raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-trace': request.id,
        'x-accel-buffering': 'no'
      });
      open.add(reply);
      let closed = false;
      let lastWrite = Date.now();
      request.raw.on('close', () => {
        closed = true;
        open.delete(reply);
      });
      return {
        isOpen: () => !closed && !reply.raw.writableEnded,
        write(text) {
          reply.raw.write(text);
          lastWrite = Date.now();
        },
        keepAlive() {
          if (Date.now() - lastWrite <= KEEPALIVE_MS) return;
          reply.raw.write(': keep-alive\n\n');
          lastWrite = Date.now();
        },
        end() {
          open.delete(reply);
          if (!reply.raw.writableEnded) reply.raw.end();
        }
      };
    }
  };
}
