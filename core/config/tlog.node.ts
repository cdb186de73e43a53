/**
 * The ledger as a C2SP transparency log: the checkpoint origin (also the name of the checkpoint's signing key), and
 * the hub as a C2SP tlog-witness: the logs it witnesses and the name of its cosigning key.
 */
import { z } from 'zod';
import { ED25519_NOTE, parseVerifierKey } from '../tlog/cosignature.node';
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
    // A note verifier key (type 0x01) whose key id is the one its name and key give (c2sp.org/signed-note).
    const parsed = VERIFIER_KEY.test(key) ? parseVerifierKey(key) : null;
    if (parts.length > 2 || !KEY_NAME.test(origin) || parsed?.type !== ED25519_NOTE) {
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
        "The logs this hub witnesses (POST /tlog/add-checkpoint, C2SP tlog-witness): entries separated by commas or newlines, each the log's checkpoint verifier key (GET /tlog/verifier-key of a peer hub), whose key name is the log's origin, or `<origin> <verifier key>` when they differ. Several keys of one origin are all trusted. Unset: the hub witnesses no log (add-checkpoint answers 404 for every origin)."
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
      .meta(setting({ allowed: 'a URL prefix without scheme, no whitespace or "+"' }))
  })
});
export type TlogConfig = z.infer<typeof tlogSettings.schema>;
