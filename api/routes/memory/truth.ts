/**
 * The memory gateway (MEMORY_PORT, bound to MEMORY_HOST, 127.0.0.1 by default): truth memory over the ledger
 * (core/memory/memory-record.ts).
 *   POST /upsert {key, truth_value}     X-DID; appends a new version as a truth entry (one synchronous ledger append)
 *   GET  /truth/{key}                   the newest version, its seq, leaf hash and how many versions the key has
 *   GET  /truth/{key}/history           the versions, newest first (limit, before = a seq cursor)
 * Writes follow the truth report's rules (services/ledger/write-truth.ts): the same daily quota per DID
 * (TRUTH_DAILY_QUOTA, shared with POST /api/report/truth), TRUTH_MAX_VALUE_BYTES, and no high-risk key (those wait
 * for a human and go through POST /api/report/truth, which starts the approval workflow). Unlike a report, an upsert
 * takes no Idempotency-Key (each one is a new version) and no deadline.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { notFound } from '../../../core/errors';
import { queryInt } from '../../../core/identifiers';
import { publicEntry } from '../../../core/ledger/ledger-entry';
import { MAX_HISTORY_PAGE, memoryKey, memoryUpsertBody } from '../../../core/memory/memory-record';
import { rawJsonSchema } from '../../../core/raw-json';
import type { MemoryStore } from '../../../store/memory/memory';
import type { TruthWrites } from '../../../services/ledger/write-truth';
import { ERROR_BODY } from '../../response-docs';

export const upsertResponse = z.object({
  ok: z.literal(true),
  message: z.string(),
  key: z.string(),
  version: z.number().int().describe('this version of the key: 1 for the first upsert'),
  seq: z.number().int(),
  event_id: z.string(),
  truth_count: z.number().int()
});

const versionFields = {
  version: z.number().int(),
  seq: z.number().int(),
  event_id: z.string(),
  value: rawJsonSchema('the value, as canonical JSON (the bytes the leaf hash covers)'),
  truth_type: z.string().nullable(),
  did: z.string().nullable(),
  created_at: z.string(),
  leaf_hash: z.string()
};

export const truthResponse = z.object({
  ok: z.literal(true),
  key: z.string(),
  versions: z.number().int().describe('how many versions the key has'),
  ...versionFields
});
export const historyResponse = z.object({
  ok: z.literal(true),
  key: z.string(),
  versions: z.number().int(),
  count: z.number().int(),
  history: z.array(z.object(versionFields)).describe('newest first'),
  next_before: z.number().int().nullable().describe('pass as ?before= for older versions; null at the first version')
});

const keyParams = z.object({ key: memoryKey });

type MemoryDeps = {
  truthWrites: TruthWrites;
  memory: MemoryStore;
  config: Pick<Config, 'TRUTH_MAX_VALUE_BYTES'>;
};

function versionView(version: number, entry: Parameters<typeof publicEntry>[0]) {
  const e = publicEntry(entry);
  return {
    version,
    seq: e.seq,
    event_id: e.event_id,
    value: e.value,
    truth_type: e.truth_type,
    did: e.did,
    created_at: e.created_at,
    leaf_hash: e.leaf_hash
  };
}

export const memoryGatewayRoutes: FastifyPluginAsyncZod<MemoryDeps> = async (app, { truthWrites, memory, config }) => {
  app.post(
    '/upsert',
    {
      config: { auth: 'did', admission: 'truth_write' },
      bodyLimit: config.TRUTH_MAX_VALUE_BYTES + 16 * 1024,
      schema: {
        body: memoryUpsertBody,
        response: {
          200: upsertResponse,
          403: ERROR_BODY.describe('a high-risk key: write it through POST /api/report/truth')
        }
      }
    },
    async (request) => {
      const { key, truth_value } = request.body;
      const appended = await truthWrites.upsertMemoryTruth(
        { did: request.principal!.did!, key, value: truth_value },
        request.log
      );
      const version = await memory.countVersions(key, appended.entry.seq);
      return {
        ok: true as const,
        message: 'truth recorded',
        key,
        version,
        seq: appended.entry.seq,
        event_id: appended.entry.event_id,
        truth_count: appended.entry.seq
      };
    }
  );

  app.get(
    '/truth/:key',
    { config: { auth: 'none' }, schema: { params: keyParams, response: { 200: truthResponse } } },
    async (request) => {
      const { key } = request.params;
      const found = await memory.latest(key);
      if (!found) throw notFound(`No version of ${key} in truth memory`);
      return {
        ok: true as const,
        key,
        versions: found.versions,
        ...versionView(found.latest.version, found.latest.entry)
      };
    }
  );

  app.get(
    '/truth/:key/history',
    {
      config: { auth: 'none' },
      schema: {
        params: keyParams,
        querystring: z.object({ limit: queryInt(1, MAX_HISTORY_PAGE).optional(), before: queryInt(1).optional() }),
        response: { 200: historyResponse }
      }
    },
    async (request) => {
      const { key } = request.params;
      const { limit = 50, before } = request.query;
      const { versions, page } = await memory.history(key, limit, before);
      if (versions === 0) throw notFound(`No version of ${key} in truth memory`);
      const last = page[page.length - 1];
      return {
        ok: true as const,
        key,
        versions,
        count: page.length,
        history: page.map((v) => versionView(v.version, v.entry)),
        next_before: last && last.version > 1 ? last.entry.seq : null
      };
    }
  );
};

/** Retry-After of a used-up daily quota (the commercial gateway's decision write answers it too). */
