/**
 * Public reads of the truth ledger: status with a signed tree head, key-prefix search, public truths, ledger
 * snapshot, the older list form, full verification, execution-seed chain verification, and RFC 6962 proofs.
 * Stored values are served as their stored canonical text (RawJson), never re-serialised.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import type { ServiceConfig } from '../../../core/config.node';
import { publicEntry } from '../../../core/ledger/ledger-entry';
import { RawJson } from '../../../core/raw-json';
import { signTreeHead } from '../../../core/ledger/tree-head.node';
import { PUBLIC_TRUTH_TYPES, SEED_KEY_PREFIX } from '../../../core/ledger/truth-record';
import { HUB_VERSION, SERVICE_NAME, TRUTH_GATEWAY_VERSION } from '../../../core/version';
import type { Ledger } from '../../../store/ledger/ledger';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { createLedgerProofs } from '../../../services/ledger/read-proofs';
import type { HubKeys } from '../../../store/keys/hub-keys';
import type { TlogCheckpoints } from '../../../services/tlog/checkpoint';
import type { TlogWitness } from '../../../services/tlog/witness';
import type { WitnessPolicy } from '../../../services/tlog/cosigned';
import {
  consistencyResponse,
  entriesResponse,
  inclusionResponse,
  ledgerResponse,
  listResponse,
  publicResponse,
  seedResponse,
  statusResponse,
  verifyResponse
} from './read.schema';

const truthGroup = (summary: string) => ({
  auth: 'none' as const,
  directory: { group: 'zhongshu_truth_api' as const, summary }
});
const limit = (max: number, fallback: number) => queryInt(1, max).default(fallback);
export const truthReadRoutes: FastifyPluginAsyncZod<{
  ledger: Ledger;
  config: Pick<ServiceConfig, 'SERVICE_DID'>;
  keys: HubKeys;
  tlog: Pick<TlogCheckpoints, 'origin' | 'verifierKey'>;
  witness: Pick<TlogWitness, 'name' | 'verifierKey' | 'origins'>;
  logWitnesses: Pick<WitnessPolicy, 'progress'>;
}> = async (app, { ledger, config, keys, tlog, witness, logWitnesses }) => {
  const proofs = createLedgerProofs(ledger);
  app.get(
    '/api/status',
    {
      config: truthGroup('Gateway state: truth count, Merkle root, signed tree head'),
      schema: { response: { 200: statusResponse } }
    },
    async () => {
      const [head, witnesses] = await Promise.all([ledger.head(), logWitnesses.progress()]);
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
        public_key: { algorithm: 'Ed25519' as const, key_id: keys.kid, base64: keys.publicKeyBase64 },
        tlog: {
          origin: tlog.origin,
          verifier_key: tlog.verifierKey,
          witness: { name: witness.name, verifier_key: witness.verifierKey, logs: witness.origins },
          witnesses
        }
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
      config: truthGroup('Ledger snapshot, newest first, with the root at that size; `before` pages back'),
      schema: {
        querystring: z.object({ limit: limit(200, 50), before: queryInt(1).optional() }),
        response: { 200: ledgerResponse }
      }
    },
    async (request) => {
      const entries = await ledger.latest(request.query.limit, { before: request.query.before });
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
    async () => proofs.verifySeedChain()
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
    async (request) => proofs.inclusion(request.query.seq, request.query.tree_size)
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
    async (request) => proofs.consistency(request.query.first, request.query.second)
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
