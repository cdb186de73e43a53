/**
 * The ledger as a C2SP transparency log: the checkpoint origin (also the name of the checkpoint's signing key), and
 * the hub as a C2SP tlog-witness: the logs it witnesses and the name of its cosigning key.
 */
import { z } from 'zod';
import { ED25519_COSIGNATURE_V1, ED25519_NOTE, parseVerifierKey } from '../tlog/cosignature.node';
import { defineCapability, setting } from './capability';

/** A C2SP note key name or checkpoint origin: non-empty, no whitespace, no `+`. */
const KEY_NAME = /^[^\s+]+$/;
/** A C2SP verifier key of an Ed25519 note signer: `<name>+<8 hex key id>+<base64 of 0x01 || 32-byte key>`. */
const VERIFIER_KEY = /^[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]{43}[A-Za-z0-9+/=]$/;

export interface WitnessedLog {
  origin: string;
  /** The log's note verifier key(s) for checkpoints of this origin. */
  verifierKeys: string[];
}

/** Why `key` is not a checkpoint (note) verifier key whose key id is its name and key's (c2sp.org/signed-note). */
export function checkpointKeyProblem(key: string): string | null {
  return VERIFIER_KEY.test(key) && safeParse(key)?.type === ED25519_NOTE
    ? null
    : 'not a checkpoint verifier key (<name>+<key id>+<base64 of 0x01 || Ed25519 key>) with the key id of that name and key';
}

/** Why `key` is not a cosignature/v1 verifier key whose key id is its name and key's (c2sp.org/tlog-cosignature). */
export function witnessKeyProblem(key: string): string | null {
  return safeParse(key)?.type === ED25519_COSIGNATURE_V1
    ? null
    : 'the key is not a cosignature/v1 verifier key (<name>+<key id>+<base64 of 0x04 || Ed25519 key>) with the key id of that name and key';
}

/** Why `url` cannot be a C2SP tlog-witness submission prefix (`<url>/add-checkpoint` is where checkpoints go). */
export function submissionPrefixProblem(url: string): string | null {
  let prefix: URL | null = null;
  try {
    prefix = new URL(url);
  } catch {
    prefix = null;
  }
  return !prefix || !/^https?:$/.test(prefix.protocol) || prefix.search || prefix.hash
    ? 'the submission prefix is not an http(s) URL without query or fragment'
    : null;
}

/** A key whose bytes are no Ed25519 public key the crypto library takes is no key either. */
function safeParse(key: string) {
  try {
    return parseVerifierKey(key);
  } catch {
    return null;
  }
}

/** `[<origin> ]<verifier key>` entries, separated by commas or newlines; keys of one origin are grouped. */
export function parseWitnessedLogs(value: string, ctx?: z.RefinementCtx): WitnessedLog[] {
  const logs = new Map<string, string[]>();
  for (const entry of value
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean)) {
    const parts = entry.split(/\s+/);
    const key = parts.length === 2 ? parts[1]! : parts[0]!;
    const origin = parts.length === 2 ? parts[0]! : key.split('+')[0]!;
    if (parts.length > 2 || !KEY_NAME.test(origin) || checkpointKeyProblem(key) !== null) {
      ctx?.addIssue({
        code: 'custom',
        message: `not "[<origin> ]<name>+<key id>+<base64 Ed25519 key>" with the key id of that name and key: ${entry}`
      });
      continue;
    }
    logs.set(origin, [...(logs.get(origin) ?? []), key]);
  }
  return [...logs].map(([origin, verifierKeys]) => ({ origin, verifierKeys }));
}

/** A witness of this hub's log: its cosignature verifier key and its C2SP tlog-witness submission prefix. */
export interface LogWitness {
  /** The witness's key name (the name of its cosignature lines). */
  name: string;
  /** `<name>+<key id>+<base64 of 0x04 || Ed25519 key>`, as GET /tlog/witness-key serves. */
  verifierKey: string;
  /** The submission prefix: the checkpoints go to `<url>/add-checkpoint`. */
  url: string;
}

/** `<cosignature verifier key> <submission prefix URL>` entries, separated by commas or newlines. */
export function parseLogWitnesses(value: string, ctx?: z.RefinementCtx): LogWitness[] {
  const witnesses: LogWitness[] = [];
  for (const entry of value
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [key = '', url = '', ...rest] = entry.split(/\s+/);
    const name = key.split('+')[0]!;
    const problem =
      rest.length > 0 || !url
        ? 'not "<witness verifier key> <submission prefix URL>"'
        : (witnessKeyProblem(key) ??
          submissionPrefixProblem(url) ??
          (witnesses.some((w) => w.name === name) ? `a second witness named ${name}` : null));
    if (problem) {
      ctx?.addIssue({ code: 'custom', message: `${problem}: ${entry}` });
      continue;
    }
    witnesses.push({ name, verifierKey: key, url: url.replace(/\/+$/, '') });
  }
  return witnesses;
}

export const tlogSettings = defineCapability({
  name: 'tlog',
  title: 'Transparency log (C2SP checkpoints, tiles, witness)',
  page: 'docs/transparency.md',
  readBy: ['api'],
  schema: z.object({
    TLOG_ORIGIN: z
      .string()
      .max(256)
      .regex(KEY_NAME, 'must have no whitespace and no "+"')
      .refine((s) => !/^[a-z][a-z0-9+.-]*:\/\//i.test(s), 'must have no scheme (C2SP tlog-checkpoint)')
      .optional()
      .describe(
        "The checkpoint origin line and the name of the checkpoint's signing key (GET /tlog/checkpoint, /tlog/verifier-key); unset: PUBLIC_URL's host and path without the scheme, followed by /tlog (e.g. localhost:8080/tlog). Every replica of one hub must use the same; changing it starts a new log for verifiers."
      )
      .meta(setting({ allowed: 'a URL prefix without scheme, no whitespace or "+"' })),
    TLOG_WITNESSED_LOGS: z
      .string()
      .max(64 * 1024)
      .transform((v, ctx) => parseWitnessedLogs(v, ctx))
      .optional()
      .describe(
        "The logs this hub witnesses (POST /tlog/add-checkpoint, C2SP tlog-witness): entries separated by commas or newlines, each the log's checkpoint verifier key (GET /tlog/verifier-key of a peer hub), whose key name is the log's origin, or `<origin> <verifier key>` when they differ. Several keys of one origin are all trusted. The peer registry adds the checkpoint keys pinned for peers (POST /admin/peers). Unset: the hub witnesses only the logs of the peer registry (add-checkpoint answers 404 for every other origin)."
      )
      .meta(setting({ allowed: '[<origin> ]<name>+<8 hex key id>+<base64 of 0x01 || Ed25519 key>, comma-separated' })),
    TLOG_WITNESS_NAME: z
      .string()
      .max(256)
      .regex(KEY_NAME, 'must have no whitespace and no "+"')
      .optional()
      .describe(
        "The name of the hub's cosigning key as a witness (the key name of its cosignature lines and of GET /tlog/witness-key); unset: the checkpoint origin followed by /witness (e.g. localhost:8080/tlog/witness). Every replica of one hub must use the same."
      )
      .meta(setting({ allowed: 'a URL prefix without scheme, no whitespace or "+"' })),
    TLOG_WITNESSES: z
      .string()
      .max(64 * 1024)
      .transform((v, ctx) => parseLogWitnesses(v, ctx))
      .optional()
      .describe(
        "The witnesses of this hub's log (C2SP tlog-witness): entries separated by commas or newlines, each `<witness verifier key> <submission prefix URL>`: the key as the witness publishes it (a peer hub's GET /tlog/witness-key: `<name>+<key id>+<base64 of 0x04 || Ed25519 key>`) and the prefix to which /add-checkpoint is appended (a peer hub's <PUBLIC_URL>/tlog). The worker submits every new checkpoint to each (workflow witness/<TEMPORAL_TASK_QUEUE>/<name>) and keeps the cosignatures that verify with that key; GET /tlog/checkpoint serves them. The peer registry adds the witness keys pinned for peers (POST /admin/peers). Unset: only the peer registry's witnesses (none: checkpoints carry no cosignature)."
      )
      .meta(
        setting({ allowed: '<name>+<8 hex key id>+<base64 of 0x04 || Ed25519 key> <http(s) URL>, comma-separated' })
      ),
    TLOG_WITNESS_QUORUM: z.coerce
      .number()
      .int()
      .min(0)
      .max(64)
      .optional()
      .describe(
        'How many witnesses of this log must cosign a checkpoint for it to count as witnessed (k of n), n counting TLOG_WITNESSES and the witnesses pinned in the peer registry (POST /admin/peers) at the time: GET /tlog/checkpoint serves the newest checkpoint with at least this many valid cosignatures (before any has, or while fewer than k witnesses are configured: the newest signed one with the cosignatures it has). Unset: all the witnesses configured at the time.'
      )
      .meta(setting({ allowed: '0 to 64' })),
    TLOG_CHECKPOINT_INTERVAL_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(2000)
      .describe(
        'With witnesses of this log (TLOG_WITNESSES or the peer registry), each API process signs a checkpoint of the ledger this often when it has grown (otherwise only GET /tlog/checkpoint signs), and tells the witness workflows about it.'
      )
      .meta(setting({ allowed: '100 to 3600000 (ms)' }))
  })
});
export type TlogConfig = z.infer<typeof tlogSettings.schema>;
