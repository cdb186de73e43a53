/**
 * The Fastify app for one listener, without listening: the pieces every listener shares (zod validation, the
 * error shape, X-Trace, auth, the endpoint directory). Tests build apps; api/server.ts makes them listen.
 */
import http from 'node:http';
import { randomHex } from '../core/random-hex.node';
import Fastify, { FastifyInstance, FastifyServerFactory, LogController } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { AppError } from '../core/errors';
import { validatorCompiler, ZodTypeProvider } from 'fastify-type-provider-zod';
import { MAX_PATH_PARAM_LENGTH } from '../core/identifiers';
import type { ServiceContext } from './context';
import type { ListenerName } from './directory';
import errorsPlugin, { clientErrorHandler, frameworkErrorHandler } from './plugins/errors';
import authPlugin from './plugins/auth';
import presenceHoldPlugin from './plugins/presence-hold';
import admissionPlugin, { EarlyRefusals } from './plugins/admission';
import { sharedRateLimitStore } from './plugins/rate-limit-store';
import { rateLimitKey } from './plugins/rate-limit-key';
import { clientAddress, trustedProxies } from './client-address';
import { documentResponses } from './response-docs';
import jsonBodyPlugin, { serializerCompiler } from './plugins/json-body';

export type App = FastifyInstance;
export type ZodApp = ReturnType<FastifyInstance['withTypeProvider']> & FastifyInstance;

export const TRACE_PATTERN = /^[A-Za-z0-9._:-]{8,64}$/;

/** A request's trace id: the caller's X-Trace when well-formed, else a fresh one. */
export function traceIdOf(req: http.IncomingMessage): string {
  const incoming = req.headers['x-trace'];
  return typeof incoming === 'string' && TRACE_PATTERN.test(incoming) ? incoming : randomHex(12);
}

/**
 * The listener's HTTP server as Fastify would make it (its HTTP/1 defaults: keep-alive and request timeouts), with
 * the admission gates' early refusals in front of Fastify's handler (api/plugins/admission.ts).
 */
function serverWithEarlyRefusals(early: EarlyRefusals): FastifyServerFactory {
  return (handler, opts) => {
    const o = opts as {
      keepAliveTimeout: number;
      requestTimeout: number;
      connectionTimeout: number;
      maxRequestsPerSocket: number;
    };
    const server = http.createServer((req, res) => {
      if (!early.refuse(req, res)) handler(req, res);
    });
    server.keepAliveTimeout = o.keepAliveTimeout;
    server.requestTimeout = o.requestTimeout;
    server.setTimeout(o.connectionTimeout);
    if (o.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = o.maxRequestsPerSocket;
    return server;
  };
}

/**
 * `responseHeaders` go on every answer of the listener, 404s and errors included (the commercial gateway's X-DID);
 * they are set in the same first hook as X-Trace, which also runs for unknown paths.
 */
export function createListenerApp(
  ctx: ServiceContext,
  listener: ListenerName,
  options: { responseHeaders?: Record<string, string> } = {}
): FastifyInstance {
  const responseHeaders = Object.entries(options.responseHeaders ?? {});
  const log = ctx.logger.child({ listener });
  const early = new EarlyRefusals(ctx.admission, options.responseHeaders ?? {}, traceIdOf, log);
  const app = Fastify({
    loggerInstance: log,
    serverFactory: serverWithEarlyRefusals(early),
    // The trace id doubles as Fastify's request id, so it is on every log line of the request.
    genReqId: traceIdOf,
    logController: new LogController({ requestIdLogLabel: 'trace_id' }),
    bodyLimit: 1024 * 1024,
    // Longer than any identifier the service issues or accepts (core/identifiers.ts), so a well-formed id always
    // reaches its route's schema; anything longer is 414 uri_too_long in the one error shape.
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Bad URLs and over-long parameters, before routing; malformed requests and oversized headers, before Fastify.
    frameworkErrors: (err, request, reply) => {
      for (const [name, value] of Object.entries(options.responseHeaders ?? {})) reply.header(name, value);
      frameworkErrorHandler(err, request, reply);
    },
    clientErrorHandler,
    forceCloseConnections: 'idle',
    return503OnClosing: true
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  documentResponses(app);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Trace', request.id);
    for (const [name, value] of responseHeaders) reply.header(name, value);
  });
  app.register(errorsPlugin);
  // Overload is refused first, before credentials or the body cost anything (api/plugins/admission.ts).
  app.register(admissionPlugin, { gates: ctx.admission, early });
  // Per-route request limits per client address (routes opt in with config.rateLimit: the anonymous routes that
  // create state), counted in MongoDB so that they hold across API processes (api/plugins/rate-limit-store.ts).
  // The client is the connecting peer, or behind a proxy of TRUSTED_PROXIES the address it forwards
  // (api/client-address.ts). A refusal is the one error shape: 429 rate_limited with Retry-After.
  const trusted = trustedProxies(ctx.config.TRUSTED_PROXIES);
  app.register(rateLimit, {
    global: false,
    keyGenerator: (request) => rateLimitKey({ ip: clientAddress(request, trusted) }),
    store: sharedRateLimitStore(ctx.chat.limits),
    errorResponseBuilder: (_request, limit) =>
      new AppError(
        'rate_limited',
        `Too many requests from this address: at most ${limit.max} per ${limit.ttl / 1000} s; retry after ${limit.after}`,
        { limit: limit.max },
        {
          'Retry-After': String(Math.max(1, Math.ceil(limit.ttl / 1000)))
        }
      )
  });
  app.register(jsonBodyPlugin, { maxDepth: ctx.config.JSON_MAX_DEPTH });
  // A heartbeat holds the presence clock from here, through authentication (api/plugins/presence-hold.ts).
  app.register(presenceHoldPlugin, { recorder: ctx.presenceRecorder });
  app.register(authPlugin, { deps: ctx });
  app.addHook('onRoute', (route) => {
    const declared = route.config?.directory;
    if (!declared || route.method === 'HEAD') return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      ctx.directory.add({
        method,
        path: route.url,
        group: declared.group,
        auth: route.config!.auth!,
        auth_also: route.config!.authAlso ?? [],
        public_read: declared.publicRead ?? route.config!.auth === 'none',
        summary: declared.summary,
        listener
      });
    }
  });
  return app as unknown as FastifyInstance;
}
