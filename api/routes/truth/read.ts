/**
 * Public reads of the truth ledger: status with a signed tree head, key-prefix search, public truths, ledger
 * snapshot, the older list form, full verification, execution-seed chain verification, and RFC 6962 proofs.
 */
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../../../core/errors';
import { publicEntry } from '../../../core/ledger-entry';
import { RawJson } from '../../../core/raw-json';
import { consistencyProof, inclusionProof, toHex } from '../../../core/merkle';
import { signTreeHead } from '../../../core/tree-head';
import { PUBLIC_TRUTH_TYPES, SEED_KEY_PREFIX } from '../../../core/truth-record';
import { HUB_VERSION, SERVICE_NAME, TRUTH_GATEWAY_VERSION } from '../../../core/version';
import { verifyLedger } from '../../../activities/store/ledger-verify';
import type { ServiceContext } from '../../context';

const truthGroup = (summary: string) => ({ auth: 'none' as const, directory: { group: 'zhongshu_truth_api' as const, summary } });
const limit = (max: number, fallback: number) => z.coerce.number().int().min(1).max(max, `limit must be at most ${max}`).default(fallback);

export async function truthReadRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const { ledger } = ctx;

  app.get('/api/status', { config: truthGroup('Gateway state: truth count, Merkle root, signed tree head') }, async () => {
    const head = await ledger.head();
    return {
      status: 'online',
      service: SERVICE_NAME,
      did: ctx.config.SERVICE_DID,
      truth_count: head.size,
      merkle_root: head.root,
      version: TRUTH_GATEWAY_VERSION,
      hub_version: HUB_VERSION,
      tree_head: signTreeHead({ tree_size: head.size, root_hash: head.root, timestamp: new Date().toISOString() }, ctx.keys.privateKey, ctx.keys.kid),
      public_key: { algorithm: 'Ed25519', key_id: ctx.keys.kid, base64: ctx.keys.publicKeyBase64 }
    };
  });

  app.get(
    '/api/truth',
    { config: truthGroup('Audit search by key prefix, at most 200 entries'), schema: { querystring: z.object({ key: z.string().max(256).default(''), limit: limit(200, 50) }) } },
    async (request) => {
      const { key, limit: n } = request.query as { key: string; limit: number };
      const results = (await ledger.findByKeyPrefix(key, n)).map(publicEntry);
      return { ok: true, count: results.length, results };
    }
  );

  app.get(
    '/api/truth/public',
    { config: truthGroup(`Newest truths of public types (${PUBLIC_TRUTH_TYPES.join(', ')})`), schema: { querystring: z.object({ limit: limit(200, 50) }) } },
    async (request) => {
      const { limit: n } = request.query as { limit: number };
      const results = (await ledger.latest(n, { truthTypes: PUBLIC_TRUTH_TYPES, kind: 'truth' })).map(publicEntry);
      return { ok: true, count: results.length, truth_types: PUBLIC_TRUTH_TYPES, results };
    }
  );

  app.get(
    '/api/ledger',
    { config: truthGroup('Ledger snapshot, newest first, with the root at that size'), schema: { querystring: z.object({ limit: limit(200, 50) }) } },
    async (request) => {
      const { limit: n } = request.query as { limit: number };
      const entries = await ledger.latest(n);
      const size = entries[0]?.seq ?? 0;
      const root = entries[0]?.root ?? (await ledger.head()).root;
      return { ok: true, size, root, count: entries.length, entries: entries.map((e) => ({ ...publicEntry(e), root_after: e.root })) };
    }
  );

  app.get(
    '/api/report/truths/list',
    { config: { auth: 'none' }, schema: { querystring: z.object({ limit: limit(200, 100) }) } },
    async (request) => {
      const { limit: n } = request.query as { limit: number };
      const entries = await ledger.latest(n, { kind: 'truth' });
      return {
        ok: true,
        count: entries.length,
        truths: entries.map((e) => ({ seq: e.seq, key: e.key, truth_value: new RawJson(e.value_json), truth_type: e.truth_type, did: e.did, event_id: e.event_id, created_at: e.created_at }))
      };
    }
  );

  app.get('/api/verify', { config: truthGroup('Recompute the Merkle root from every entry and compare with the stored root') }, async () => {
    const report = await verifyLedger(ledger);
    return { ok: report.consistent, ...report, checked_at: new Date().toISOString() };
  });

  app.get('/api/verify-seed', { config: truthGroup(`Verify the hash chain of execution-seed records (${SEED_KEY_PREFIX}*)`) }, async () => {
    let previous: string | null = null;
    let length = 0;
    let firstBreak: { seq: number; expected_prev_seed_hash: string | null; found: unknown } | null = null;
    for (let after = 0; ; ) {
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
  });

  app.get(
    '/api/proof/inclusion',
    { config: { auth: 'none' }, schema: { querystring: z.object({ seq: z.coerce.number().int().min(1), tree_size: z.coerce.number().int().min(1).optional() }) } },
    async (request) => {
      const { seq, tree_size } = request.query as { seq: number; tree_size?: number };
      const head = await ledger.head();
      const size = tree_size ?? head.size;
      if (size > head.size) throw new AppError('not_found', `tree_size ${size} is larger than the ledger (${head.size})`);
      if (seq > size) throw new AppError('invalid_request', `seq ${seq} is not in a tree of ${size} entries`, { fields: [{ field: 'querystring.seq', message: 'must be <= tree_size' }] });
      const [entry, atSize] = await Promise.all([ledger.get(seq), ledger.get(size)]);
      if (!entry || !atSize) throw new AppError('not_found', `entry ${!entry ? seq : size} is missing from the ledger`);
      const path = await inclusionProof(seq - 1, size, (l, i) => ledger.perfectSubtree(l, i));
      return { ok: true, seq, leaf_index: seq - 1, tree_size: size, leaf_hash: entry.leaf_hash, root: atSize.root, audit_path: path.map(toHex), entry: publicEntry(entry) };
    }
  );

  app.get(
    '/api/proof/consistency',
    { config: { auth: 'none' }, schema: { querystring: z.object({ first: z.coerce.number().int().min(1), second: z.coerce.number().int().min(1) }) } },
    async (request) => {
      const { first, second } = request.query as { first: number; second: number };
      if (first > second) throw new AppError('invalid_request', 'first must be <= second', { fields: [{ field: 'querystring.first', message: 'must be <= second' }] });
      const head = await ledger.head();
      if (second > head.size) throw new AppError('not_found', `second ${second} is larger than the ledger (${head.size})`);
      const [a, b] = await Promise.all([ledger.get(first), ledger.get(second)]);
      if (!a || !b) throw new AppError('not_found', 'an entry of the requested sizes is missing from the ledger');
      const proof = await consistencyProof(first, second, (l, i) => ledger.perfectSubtree(l, i));
      return { ok: true, first, second, first_root: a.root, second_root: b.root, proof: proof.map(toHex) };
    }
  );
}

/** The backup listener's short status form. */
export async function backupStatusRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  app.get('/api/status', { config: { auth: 'none' } }, async () => {
    const head = await opts.ctx.ledger.head();
    return { truth_count: head.size, status: 'online' };
  });
}
