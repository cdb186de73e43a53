/**
 * The truth record a node reports (docs/ledger.md#writing) and the rules on it: the request schema with the
 * documented error codes,
 * the key shape, and which writes are high-risk (held for a human approver).
 */
import { z } from 'zod';
import { isJsonObject, JsonValue } from './canonical-json';

export const TRUTH_TYPES = [
  'meta_law',
  'rule',
  'config',
  'decision',
  'data',
  'creative',
  'risk',
  'protocol',
  'unknown'
] as const;
export type TruthType = (typeof TRUTH_TYPES)[number];

/** Execution-seed records: chained by hash, checked by GET /api/verify-seed. */
export const SEED_KEY_PREFIX = 'KERNEL.EVOLUTION.DIRECTIVE.';
/** The hub's own records (admin actions, approvals, node state changes) live under this namespace. */
export const HUB_NAMESPACE = 'hub';

/** `<namespace>.<key>`: two or more dot-separated segments of letters, digits and `_ - : +`. */
export const KEY_PATTERN = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_:+-]+)+$/;
export const MAX_KEY_LENGTH = 256;

/** Why a key is refused, or null when it is fine. */
export function keyProblem(key: string): string | null {
  if (key.length > MAX_KEY_LENGTH) return `key must be at most ${MAX_KEY_LENGTH} characters`;
  if (/^truth-/i.test(key)) return "key must not start with 'truth-' (that prefix is reserved for event ids)";
  if (!KEY_PATTERN.test(key))
    return 'key must have the shape <namespace>.<key> (letters, digits, _ - : + in dot-separated segments), e.g. mysystem.deploy.20261120T101500Z';
  if (key.split('.')[0] === HUB_NAMESPACE) return `namespace '${HUB_NAMESPACE}' is reserved for the hub's own records`;
  return null;
}

/**
 * The body's fields. `value` is unknown and optional to zod on purpose: the rules below must answer documented codes
 * (value_must_be_object, empty_value_rejected, invalid_key) rather than a generic validation failure. The OpenAPI
 * metadata states the rules themselves: value is a required object, and the key has the shape keyProblem accepts.
 */
const truthReportFields = z
  .object({
    key: z
      .string()
      // KEY_PATTERN, and not the reserved prefix (any case) or namespace.
      .meta({
        description: '<namespace>.<key>, recommended <system>.<event>.<timestamp>',
        pattern: `^(?![Tt][Rr][Uu][Tt][Hh]-)(?!hub\\.)${KEY_PATTERN.source.slice(1)}`,
        maxLength: MAX_KEY_LENGTH
      }),
    value: z.unknown().optional().meta({
      type: 'object',
      additionalProperties: true,
      description: 'a JSON object (value_must_be_object otherwise)'
    }),
    truth_type: z.enum(TRUTH_TYPES).optional(),
    did: z.string().optional().describe('the writer DID, repeated from X-DID'),
    content: z
      .unknown()
      .optional()
      .meta({ deprecated: true, description: 'old form: without value it is refused with empty_value_rejected' }),
    truth_value: z
      .unknown()
      .optional()
      .meta({ deprecated: true, description: 'old form: without value it is refused with empty_value_rejected' })
  })
  .meta({ required: ['key', 'value'] });

/**
 * The request body. Fields are checked in one pass so each failure carries the documented code:
 * empty_value_rejected (only the old content/truth_value fields), value_must_be_object, invalid_key.
 */
export const truthReportBody = truthReportFields
  .superRefine((body, ctx) => {
    if (body.value === undefined && (body.content !== undefined || body.truth_value !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['value'],
        message:
          'empty_value_rejected: the old top-level content/truth_value fields are no longer accepted; send value as a JSON object',
        params: { code: 'empty_value_rejected' }
      });
      return;
    }
    if (!isJsonObject(body.value)) {
      ctx.addIssue({
        code: 'custom',
        path: ['value'],
        message: 'value_must_be_object: value must be a JSON object',
        params: { code: 'value_must_be_object' }
      });
    }
    const problem = keyProblem(body.key);
    if (problem) ctx.addIssue({ code: 'custom', path: ['key'], message: problem, params: { code: 'invalid_key' } });
  })
  // The refinement has checked that value is a JSON object (it came from the strict JSON parser).
  .transform((body) => body as ReportedTruth);

type ReportedTruth = Omit<z.input<typeof truthReportFields>, 'value'> & { value: { [key: string]: JsonValue } };
export type TruthReportBody = z.output<typeof truthReportBody>;

export interface RiskPolicy {
  highRiskTypes: string[];
  highRiskKeyPrefixes: string[];
}

/** Why a write must wait for a human, or null when it may be appended at once. */
export function heldBecause(key: string, truthType: string | undefined, policy: RiskPolicy): string | null {
  if (truthType && policy.highRiskTypes.includes(truthType)) return `truth_type ${truthType} is high-risk`;
  const prefix = policy.highRiskKeyPrefixes.find((p) => key.startsWith(p));
  return prefix ? `key prefix ${prefix} is high-risk` : null;
}

/** Truth types GET /api/truth/public shows. */
export const PUBLIC_TRUTH_TYPES: TruthType[] = ['meta_law', 'rule', 'protocol', 'config', 'data'];
