/**
 * Public reads of the truth ledger: status with a signed tree head, key-prefix search, public truths, ledger
 * snapshot, the older list form, full verification, execution-seed chain verification, and RFC 6962 proofs.
 * Stored values are served as their stored canonical text (RawJson), never re-serialised.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import { publicEntry, publicEntrySchema } from '../../../core/ledger/ledger-entry';
import { consistencyProof, inclusionProof, toHex } from '../../../core/ledger/merkle.node';
import { RawJson, rawJsonSchema } from '../../../core/raw-json';
import { signTreeHead } from '../../../core/ledger/tree-head.node';
import { PUBLIC_TRUTH_TYPES, SEED_KEY_PREFIX } from '../../../core/ledger/truth-record';
import { HUB_VERSION, SERVICE_NAME, TRUTH_GATEWAY_VERSION } from '../../../core/version';
import type { Ledger } from '../../../store/ledger/ledger';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import type { HubKeys } from '../../keys';

const truthGroup = (summary: string) => ({
  auth: 'none' as const,
  directory: { group: 'zhongshu_truth_api' as const, summary }
});
const limit = (max: number, fallback: number) => queryInt(1, max).default(fallback);
const hex = z.string().regex(/^[0-9a-f]{64}$/);

const signedTreeHead = z.object({
  tree_size: z.number().int(),
  root_hash: hex,
  timestamp: z.string(),
  algorithm: z.literal('Ed25519'),
  key_id: z.string(),
  signature: z
    .string()
    .describe('base64 Ed25519 signature over the canonical JSON {"root_hash","timestamp","tree_size"}')
});
const statusResponse = z.object({
  status: z.literal('online'),
  service: z.string(),
  did: z.string(),
  truth_count: z.number().int(),
  merkle_root: hex,
  version: z.string(),
  hub_version: z.string(),
  tree_head: signedTreeHead,
  public_key: z.object({ algorithm: z.literal('Ed25519'), key_id: z.string(), base64: z.string() })
});
const entriesResponse = z.object({ ok: z.literal(true), count: z.number().int(), results: z.array(publicEntrySchema) });
const publicResponse = entriesResponse.extend({ truth_types: z.array(z.string()) });
const ledgerResponse = z.object({
  ok: z.literal(true),
  size: z.number().int(),
  root: hex,
  count: z.number().int(),
  entries: z.array(publicEntrySchema.extend({ root_after: hex }))
});
const listResponse = z.object({
  ok: z.literal(true),
  count: z.number().int(),
  truths: z.array(
    z.object({
      seq: z.number().int(),
      key: z.string(),
      truth_value: rawJsonSchema('the value, as canonical JSON'),
      truth_type: z.string().nullable(),
      did: z.string().nullable(),
      event_id: z.string(),
      created_at: z.string()
    })
  )
});
const verifyResponse = z.object({
  ok: z.boolean(),
  consistent: z.boolean(),
  computed: hex,
  stored: hex,
  ledger_lines: z.number().int(),
  first_bad_seq: z.number().int().nullable(),
  problem: z.string().nullable(),
  checked_at: z.string()
});
const seedResponse = z.object({
  ok: z.boolean(),
  chain_length: z.number().int(),
  head_hash: hex.nullable(),
  first_break: z
    .object({ seq: z.number().int(), expected_prev_seed_hash: hex.nullable(), found: z.unknown() })
    .nullable(),
  rule: z.string(),
  checked_at: z.string()
});
const inclusionResponse = z.object({
  ok: z.literal(true),
  seq: z.number().int(),
  leaf_index: z.number().int(),
  tree_size: z.number().int(),
  leaf_hash: hex,
  root: hex,
  audit_path: z.array(hex),
  entry: publicEntrySchema
});
const consistencyResponse = z.object({
  ok: z.literal(true),
  first: z.number().int(),
  second: z.number().int(),
  first_root: hex,
  second_root: hex,
  proof: z.array(hex)
});

export const truthReadRoutes: FastifyPluginAsyncZod<{ ledger: Ledger; config: Config; keys: HubKeys }> = async (
  app,
  { ledger, config, keys }
) => {
  app.get(
    '/api/status',
    {
      config: truthGroup('Gateway state: truth count, Merkle root, signed tree head'),
      schema: { response: { 200: statusResponse } }
    },
    async () => {
      const head = await ledger.head();
      return {
        status: 'online' as const,
        service: SERVICE_NAME,
        did: config.SERVICE_DID,
        truth_count: head.size,
        merkle_root: head.root,
        version: TRUTH_GATEWAY_VERSION,
        hub_version: HUB_VERSION,
        tree_head: signTreeHead(
          { tree_size: head.size, root_hash: head.root, timestamp: new Date().toISOString() },
          keys.privateKey,
          keys.kid
        ),
        public_key: { algorithm: 'Ed25519' as const, key_id: keys.kid, base64: keys.publicKeyBase64 }
      };
    }
  );

  app.get(
    '/api/truth',
    {
      config: truthGroup('Audit search by key prefix, at most 200 entries'),
      schema: {
        querystring: z.object({ key: z.string().max(256).default(''), limit: limit(200, 50) }),
        response: { 200: entriesResponse }
      }
    },
    async (request) => {
      const results = (await ledger.findByKeyPrefix(request.query.key, request.query.limit)).map(publicEntry);
      return { ok: true as const, count: results.length, results };
    }
  );

  app.get(
    '/api/truth/public',
    {
      config: truthGroup(`Newest truths of public types (${PUBLIC_TRUTH_TYPES.join(', ')})`),
      schema: { querystring: z.object({ limit: limit(200, 50) }), response: { 200: publicResponse } }
    },
    async (request) => {
      const results = (await ledger.latest(request.query.limit, { truthTypes: PUBLIC_TRUTH_TYPES, kind: 'truth' })).map(
        publicEntry
      );
      return { ok: true as const, count: results.length, truth_types: PUBLIC_TRUTH_TYPES, results };
    }
  );

  app.get(
    '/api/ledger',
    {
      config: truthGroup('Ledger snapshot, newest first, with the root at that size'),
      schema: { querystring: z.object({ limit: limit(200, 50) }), response: { 200: ledgerResponse } }
    },
    async (request) => {
      const entries = await ledger.latest(request.query.limit);
      const size = entries[0]?.seq ?? 0;
      const root = entries[0]?.root ?? (await ledger.head()).root;
      return {
        ok: true as const,
        size,
        root,
        count: entries.length,
        entries: entries.map((e) => ({ ...publicEntry(e), root_after: e.root }))
      };
    }
  );

  app.get(
    '/api/report/truths/list',
    {
      config: { auth: 'none' },
      schema: { querystring: z.object({ limit: limit(200, 100) }), response: { 200: listResponse } }
    },
    async (request) => {
      const entries = await ledger.latest(request.query.limit, { kind: 'truth' });
      return {
        ok: true as const,
        count: entries.length,
        truths: entries.map((e) => ({
          seq: e.seq,
          key: e.key,
          truth_value: new RawJson(e.value_json),
          truth_type: e.truth_type,
          did: e.did,
          event_id: e.event_id,
          created_at: e.created_at
        }))
      };
    }
  );

  app.get(
    '/api/verify',
    {
      config: truthGroup('Recompute the Merkle root from every entry and compare with the stored root'),
      schema: { response: { 200: verifyResponse } }
    },
    async () => {
      const report = await verifyLedger(ledger);
      return { ok: report.consistent, ...report, checked_at: new Date().toISOString() };
    }
  );

  app.get(
    '/api/verify-seed',
    {
      config: truthGroup(`Verify the hash chain of execution-seed records (${SEED_KEY_PREFIX}*)`),
      schema: { response: { 200: seedResponse } }
    },
    async () => {
      let previous: string | null = null;
      let length = 0;
      let firstBreak: { seq: number; expected_prev_seed_hash: string | null; found: unknown } | null = null;
      for (let after = 0; ;) {
        const batch = await ledger.after(after, 500, { keyPrefix: SEED_KEY_PREFIX });
        if (batch.length === 0) break;
        for (const e of batch) {
          const found = (JSON.parse(e.value_json) as Record<string, unknown>).prev_seed_hash ?? null;
          if (!firstBreak && found !== previous) firstBreak = { seq: e.seq, expected_prev_seed_hash: previous, found };
          previous = e.leaf_hash;
          length += 1;
        }
        after = batch[batch.length - 1]!.seq;
      }
      return {
        ok: firstBreak === null,
        chain_length: length,
        head_hash: previous,
        first_break: firstBreak,
        rule: `each ${SEED_KEY_PREFIX}* value carries prev_seed_hash = leaf_hash of the previous seed record (null for the first)`,
        checked_at: new Date().toISOString()
      };
    }
  );

  app.get(
    '/api/proof/inclusion',
    {
      config: { auth: 'none' },
      schema: {
        querystring: z.object({ seq: queryInt(1), tree_size: queryInt(1).optional() }),
        response: { 200: inclusionResponse }
      }
    },
    async (request) => {
      const { seq, tree_size } = request.query;
      const head = await ledger.head();
      const size = tree_size ?? head.size;
      if (size > head.size)
        throw new AppError('not_found', `tree_size ${size} is larger than the ledger (${head.size})`);
      if (seq > head.size) throw new AppError('not_found', `no entry ${seq}: the ledger has ${head.size}`);
      if (seq > size)
        throw new AppError('invalid_request', `seq ${seq} is not in a tree of ${size} entries`, {
          fields: [{ field: 'querystring.seq', message: 'must be <= tree_size' }]
        });
      const [entry, atSize] = await Promise.all([ledger.get(seq), ledger.get(size)]);
      if (!entry || !atSize) throw new AppError('not_found', `entry ${!entry ? seq : size} is missing from the ledger`);
      const path = await inclusionProof(seq - 1, size, (l, i) => ledger.perfectSubtree(l, i));
      return {
        ok: true as const,
        seq,
        leaf_index: seq - 1,
        tree_size: size,
        leaf_hash: entry.leaf_hash,
        root: atSize.root,
        audit_path: path.map(toHex),
        entry: publicEntry(entry)
      };
    }
  );

  app.get(
    '/api/proof/consistency',
    {
      config: { auth: 'none' },
      schema: {
        querystring: z.object({ first: queryInt(1), second: queryInt(1) }),
        response: { 200: consistencyResponse }
      }
    },
    async (request) => {
      const { first, second } = request.query;
      if (first > second)
        throw new AppError('invalid_request', 'first must be <= second', {
          fields: [{ field: 'querystring.first', message: 'must be <= second' }]
        });
      const head = await ledger.head();
      if (second > head.size)
        throw new AppError('not_found', `second ${second} is larger than the ledger (${head.size})`);
      const [a, b] = await Promise.all([ledger.get(first), ledger.get(second)]);
      if (!a || !b) throw new AppError('not_found', 'an entry of the requested sizes is missing from the ledger');
      const proof = await consistencyProof(first, second, (l, i) => ledger.perfectSubtree(l, i));
      return { ok: true as const, first, second, first_root: a.root, second_root: b.root, proof: proof.map(toHex) };
    }
  );
};

/** The backup listener's short status form. */
export const backupStatusRoutes: FastifyPluginAsyncZod<{ ledger: Ledger }> = async (app, { ledger }) => {
  app.get(
    '/api/status',
    {
      config: { auth: 'none' },
      schema: { response: { 200: z.object({ truth_count: z.number().int(), status: z.literal('online') }) } }
    },
    async () => {
      const head = await ledger.head();
      return { truth_count: head.size, status: 'online' as const };
    }
  );
};
