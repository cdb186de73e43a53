/**
 * The hub's WebSocket (capability `compute`):
 *   GET /v1/ws/info   public: where the socket is, its streams, which need a credential, the messages and resume
 *   GET /v1/ws        the socket itself (@fastify/websocket; not in the OpenAPI document, which cannot describe it)
 *
 * A client sends one subscribe message, `{"type":"subscribe","streams":["ledger","nodes"],"after":<seq>}`, and
 * then receives every ledger entry after that seq (`ledger`, public, the same entries as GET /api/sub-l0) and/or
 * every node state change after it (`nodes`: the node lifecycle's `hub.node.state_changed` ledger events, for
 * authenticated subscribers only: an OAuth access token as `Authorization: Bearer` on the upgrade request or as
 * `access_token` in the subscribe message). Both streams follow the ledger, the one source the SSE subscription
 * follows (store/ledger Ledger.after), so every event carries its ledger seq and a reconnecting client resumes with
 * `after` = the last seq it saw; appends made by any API process are delivered. A socket catches up on its own,
 * then follows one shared tail of the ledger per process (services/compute/ledger-stream.ts).
 */
import websocket from '@fastify/websocket';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import type { CredentialStore } from '../../../store/credentials';
import type { Ledger } from '../../../store/ledger/ledger';
import { createLedgerStreams, PUBLIC_STREAMS, STREAMS, type StreamSink } from '../../../services/compute/ledger-stream';
import type { HubKeys } from '../../../store/keys/hub-keys';
import { verifyAccessToken } from '../../plugins/auth';
import { stringifyJson } from '../../plugins/json-body';

export const WS_PATH = '/v1/ws';
export const WS_PROTOCOL_VERSION = 1;
const PING_MS = 15_000;
/** Sockets one API process serves at once; more are closed with 1013. */
export const WS_MAX_SOCKETS = 1000;
/** Close codes the socket uses (4000-4999 are the application's, RFC 6455 §7.4.2). */
export const WS_CLOSE = { bad_message: 4400, unauthorized: 4401, going_away: 1001, try_again_later: 1013 } as const;

const subscribeMessage = z
  .object({
    type: z.literal('subscribe'),
    streams: z.array(z.enum(STREAMS)).min(1).max(STREAMS.length),
    after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
    access_token: z.string().max(8192).optional()
  })
  .strict();

const infoResponse = z.object({
  ok: z.literal(true),
  url: z.string().describe('the WebSocket URL (ws:// or wss://)'),
  protocol_version: z.number().int(),
  streams: z.array(z.object({ name: z.enum(STREAMS), public: z.boolean(), description: z.string() })),
  auth: z.string(),
  subscribe: z.string().describe('the subscribe message, as JSON'),
  events: z.record(z.string(), z.string()).describe('the messages the server sends, by type'),
  resume: z.string(),
  close_codes: z.record(z.string(), z.number().int())
});

const wsUrl = (publicUrl: string) => publicUrl.replace(/^http/, 'ws') + WS_PATH;

function bearerOf(request: FastifyRequest): string | undefined {
  const value = request.headers.authorization;
  const match = typeof value === 'string' ? /^Bearer\s+(\S+)$/i.exec(value) : null;
  return match?.[1];
}

export const webSocketRoutes: FastifyPluginAsyncZod<{
  ledger: Ledger;
  config: Pick<Config, 'publicUrl'>;
  keys: HubKeys;
  credentials: CredentialStore;
}> = async (app, deps) => {
  const { ledger, config } = deps;
  await app.register(websocket, { options: { maxPayload: 16 * 1024 } });

  const open = new Set<WebSocket>();
  const streams = createLedgerStreams(ledger, app.log);
  app.addHook('preClose', async () => {
    for (const socket of open) socket.close(WS_CLOSE.going_away, 'server stopping');
  });

  app.get(
    '/v1/ws/info',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'federated_compute',
          summary: 'WebSocket information: URL, streams (ledger entries, node state changes), auth, resume',
          publicRead: true
        }
      },
      schema: { response: { 200: infoResponse } }
    },
    async () => ({
      ok: true as const,
      url: wsUrl(config.publicUrl),
      protocol_version: WS_PROTOCOL_VERSION,
      streams: [
        {
          name: 'ledger' as const,
          public: true,
          description: 'every ledger entry after the cursor, then each new one (as GET /api/sub-l0)'
        },
        {
          name: 'nodes' as const,
          public: false,
          description:
            'node state changes (pending_review, online, offline, rejected) with reason and actor; needs an OAuth access token'
        }
      ],
      auth: 'streams that are not public need an OAuth access token (POST /v1/oauth/token): Authorization: Bearer <token> on the upgrade request, or access_token in the subscribe message; a DPoP-bound token is not accepted here',
      subscribe: '{"type":"subscribe","streams":["ledger","nodes"],"after":0}',
      events: {
        subscribed: '{"type":"subscribed","streams":[...],"after":<seq>}: the subscription is live',
        entry:
          '{"type":"entry","seq":<seq>,"entry":{seq,key,value,truth_type,did,kind,event_id,created_at,leaf_hash}} (stream ledger)',
        node_state: '{"type":"node_state","seq":<seq>,"node_id","from","to","at","reason","actor"} (stream nodes)',
        error: '{"type":"error","error":<code>,"message":<text>}, followed by a close with the matching code'
      },
      resume:
        'every event carries its ledger seq; reconnect and subscribe with after = the last seq received to receive exactly what followed it',
      close_codes: { ...WS_CLOSE }
    })
  );

  app.get(WS_PATH, { websocket: true, config: { auth: 'none' }, schema: { hide: true } }, (socket, request) => {
    if (open.size >= WS_MAX_SOCKETS) {
      socket.close(WS_CLOSE.try_again_later, 'too many connections; retry later');
      return;
    }
    open.add(socket);
    let closed = false;
    let subscribed = false;
    const sink: StreamSink = {
      closed: () => closed,
      buffered: () => socket.bufferedAmount,
      send: (message) => {
        if (!closed && socket.readyState === socket.OPEN) socket.send(stringifyJson(message));
      },
      onClose: (listener) => socket.on('close', listener)
    };
    const refuse = (code: keyof typeof WS_CLOSE, message: string) => {
      sink.send({ type: 'error', error: code, message });
      socket.close(WS_CLOSE[code], code);
      closed = true;
    };
    const ping = setInterval(() => socket.ping(), PING_MS);
    socket.on('close', () => {
      closed = true;
      clearInterval(ping);
      open.delete(socket);
    });
    socket.on('error', () => socket.terminate());

    socket.on('message', (data, isBinary) => {
      if (closed) return;
      if (subscribed) return refuse('bad_message', 'one subscribe message per connection; reconnect to change it');
      let parsed: unknown;
      try {
        parsed = isBinary ? undefined : JSON.parse(data.toString());
      } catch {
        parsed = undefined;
      }
      const result = subscribeMessage.safeParse(parsed);
      if (!result.success)
        return refuse(
          'bad_message',
          `expected ${'{"type":"subscribe","streams":["ledger"|"nodes",...],"after":<seq>}'}: ${result.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ')}`
        );
      subscribed = true;
      void start(result.data);
    });

    const start = async (sub: z.infer<typeof subscribeMessage>) => {
      const subscribedTo = new Set(sub.streams);
      if ([...subscribedTo].some((s) => !PUBLIC_STREAMS.has(s))) {
        const token = bearerOf(request) ?? sub.access_token;
        const claims = token ? await verifyAccessToken(token, deps).catch(() => null) : null;
        if (!claims)
          return refuse(
            'unauthorized',
            'the nodes stream needs a valid OAuth access token (Authorization: Bearer or access_token)'
          );
        if (claims.jkt)
          return refuse(
            'unauthorized',
            'a DPoP-bound token needs a proof per request, which a WebSocket cannot carry; use an unbound token'
          );
      }
      sink.send({ type: 'subscribed', streams: [...subscribedTo], after: sub.after });
      await streams.follow(subscribedTo, sub.after, sink, request.log);
    };
  });
};
