/**
 * The commercial gateway (COMMERCIAL_PORT, base path /api/v1; docs/gateways.md), marked as a simulation:
 *   GET  /health                 status, service, version "V1.0", simulation: true
 *   POST /decision               three-dimension scoring (core/commercial/decision.ts); record: true appends it
 *   GET  /memory/truth/{key}     proxied to the memory gateway over HTTP (memory-client.ts)
 *   POST /memory/upsert          proxied likewise, with the caller's X-DID
 *   GET  /products               the product matrix (PRODUCTS_FILE or the default shipped in core/commercial/)
 * Every answer of this listener, errors and unknown paths included, carries X-DID (the hub's DID) and X-Trace
 * (api/listeners.ts gives the listener's app that header).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Db } from 'mongodb';
import { z } from 'zod';
import type { ServiceConfig } from '../../../core/config.node';
import { decisionOptions } from '../../../core/commercial/decision';
import { productMatrixSchema, type ProductMatrix } from '../../../core/commercial/products';
import { AppError } from '../../../core/errors';
import { canonicalJson, isJsonObject, type JsonValue } from '../../../core/ledger/canonical-json';
import { memoryKey, memoryUpsertBody } from '../../../core/memory/memory-record';
import { RawJson } from '../../../core/raw-json';
import { SERVICE_NAME } from '../../../core/version';
import { createDecisions, type DecisionDeps } from '../../../services/commercial/record-decision';
import { ERROR_BODY } from '../../response-docs';
import { truthResponse, upsertResponse } from '../memory/truth';
import type { MemoryGatewayClient } from '../../../services/commercial/memory-client';

export const COMMERCIAL_VERSION = 'V1.0' as const;
export const COMMERCIAL_PREFIX = '/api/v1';

const healthResponse = z.object({
  ok: z.boolean(),
  status: z.enum(['up', 'degraded']),
  service: z.string(),
  listener: z.literal('commercial'),
  version: z.literal(COMMERCIAL_VERSION),
  simulation: z
    .literal(true)
    .describe('the commercial gateway is a simulation (docs/gateways.md): no real billing or products'),
  did: z.string(),
  mongo: z.enum(['up', 'down']),
  memory_gateway: z.string().describe('where memory calls are proxied')
});

export const commercialHealthRoutes: FastifyPluginAsyncZod<{
  db: Db;
  config: Pick<ServiceConfig, 'SERVICE_DID'>;
  memoryGatewayUrl: string;
}> = async (app, { db, config, memoryGatewayUrl }) => {
  app.get('/health', { config: { auth: 'none' }, schema: { response: { 200: healthResponse } } }, async () => {
    const mongo = await db
      .command({ ping: 1 }, { timeoutMS: 1000 })
      .then(() => 'up' as const)
      .catch(() => 'down' as const);
    return {
      ok: mongo === 'up',
      status: mongo === 'up' ? ('up' as const) : ('degraded' as const),
      service: `${SERVICE_NAME} commercial gateway`,
      listener: 'commercial' as const,
      version: COMMERCIAL_VERSION,
      simulation: true as const,
      did: config.SERVICE_DID,
      mongo,
      memory_gateway: memoryGatewayUrl
    };
  });
};

const scoredOption = z.object({
  name: z.string(),
  benefit: z.number(),
  risk: z.number(),
  cost: z.number(),
  score: z.number()
});
const decisionResponse = z.object({
  ok: z.literal(true),
  decision: z.array(scoredOption).describe('the options with their score, best first'),
  recommended: z.string(),
  weights: z.object({ benefit: z.number(), risk: z.number(), cost: z.number() }),
  recorded: z
    .object({ key: z.string(), seq: z.number().int(), event_id: z.string() })
    .nullable()
    .describe('the ledger entry when record was true')
});

export const decisionRoutes: FastifyPluginAsyncZod<DecisionDeps> = async (app, deps) => {
  const decisions = createDecisions(deps);
  app.post(
    '/decision',
    {
      config: { auth: 'none' },
      schema: {
        body: z.object({
          options: decisionOptions,
          record: z
            .boolean()
            .optional()
            .describe('append the decision to the ledger (truth_type decision); needs X-DID of a registered DID')
        }),
        response: { 200: decisionResponse, 401: ERROR_BODY.describe('record: true without X-DID of a registered DID') }
      }
    },
    async (request) => decisions.decide(request.body.options, request.body.record ?? false, request.headers['x-did'])
  );
};

const PROXIED_ERRORS = {
  502: ERROR_BODY.describe('the memory gateway is down, timed out or failed (5xx)'),
  403: ERROR_BODY.describe('passed through from the memory gateway: a high-risk key')
};

/** What the memory gateway answers, as the proxy checks it before passing it on (the value served exactly). */
const upstreamTruth = truthResponse.extend({
  value: z.custom<{ [key: string]: JsonValue }>(isJsonObject, 'a JSON object')
});

export const memoryProxyRoutes: FastifyPluginAsyncZod<{ memoryGateway: MemoryGatewayClient }> = async (
  app,
  { memoryGateway }
) => {
  app.get(
    '/memory/truth/:key',
    {
      config: { auth: 'none' },
      schema: { params: z.object({ key: memoryKey }), response: { 200: truthResponse, ...PROXIED_ERRORS } }
    },
    async (request) => {
      const body = await memoryGateway.call('GET', `/truth/${encodeURIComponent(request.params.key)}`, {
        'x-trace': request.id
      });
      const parsed = upstreamTruth.safeParse(body);
      if (!parsed.success)
        throw new AppError('upstream_failed', 'The memory gateway answered in an unknown form; retry later');
      return { ...parsed.data, value: new RawJson(canonicalJson(parsed.data.value)) };
    }
  );

  app.post(
    '/memory/upsert',
    {
      config: { auth: 'did' },
      schema: { body: memoryUpsertBody, response: { 200: upsertResponse, ...PROXIED_ERRORS } }
    },
    async (request) => {
      const { key, truth_value } = request.body;
      const body = await memoryGateway.call(
        'POST',
        '/upsert',
        { 'x-trace': request.id, 'x-did': request.principal!.did! },
        { key, truth_value }
      );
      const parsed = upsertResponse.safeParse(body);
      if (!parsed.success)
        throw new AppError('upstream_failed', 'The memory gateway answered in an unknown form; retry later');
      return parsed.data;
    }
  );
};

export const productRoutes: FastifyPluginAsyncZod<{ products: ProductMatrix }> = async (app, { products }) => {
  const productsResponse = productMatrixSchema.extend({ ok: z.literal(true) });
  app.get('/products', { config: { auth: 'none' }, schema: { response: { 200: productsResponse } } }, async () => ({
    ok: true as const,
    ...products
  }));
};
