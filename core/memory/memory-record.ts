/**
 * Truth memory (the memory gateway, MEMORY_PORT): a key's versions are the truth entries of the ledger with that
 * key, in seq order. An upsert appends a new entry (nothing is ever updated), so version n of a key is simply the
 * n-th truth entry with that key; the number is derived from the ledger, never stored, and so cannot race.
 *
 * The body follows the truth report's rules (core/ledger/truth-record.ts): the same key rules (invalid_key), the value
 * a JSON object (value_must_be_object), and the old top-level `content` / `value` forms refused
 * (empty_value_rejected). Only the field name differs: memory writes name the value `truth_value` (docs/gateways.md).
 */
import { z } from 'zod';
import { isJsonObject, JsonValue } from '../ledger/canonical-json';
import { KEY_PATTERN, keyProblem, MAX_KEY_LENGTH } from '../ledger/truth-record';

/** Most versions one history page returns. */
export const MAX_HISTORY_PAGE = 200;

const keyMeta = {
  description: '<namespace>.<key>, as in the truth report',
  pattern: `^(?![Tt][Rr][Uu][Tt][Hh]-)(?!hub\\.)${KEY_PATTERN.source.slice(1)}`,
  maxLength: MAX_KEY_LENGTH
};

/** A memory key, in a body or a path: the truth report's key rules, failing with invalid_key. */
export const memoryKey = z
  .string()
  .meta(keyMeta)
  .superRefine((key, ctx) => {
    const problem = keyProblem(key);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, params: { code: 'invalid_key' } });
  });

const upsertFields = z
  .object({
    key: z.string().meta(keyMeta),
    truth_value: z.unknown().optional().meta({
      type: 'object',
      additionalProperties: true,
      description: 'a JSON object (value_must_be_object otherwise)'
    }),
    content: z
      .unknown()
      .optional()
      .meta({ deprecated: true, description: 'old form: without truth_value it is refused with empty_value_rejected' }),
    value: z.unknown().optional().meta({
      deprecated: true,
      description: 'the truth report field name: without truth_value it is refused with empty_value_rejected'
    })
  })
  .meta({ required: ['key', 'truth_value'] });

export const memoryUpsertBody = upsertFields
  .superRefine((body, ctx) => {
    if (body.truth_value === undefined && (body.content !== undefined || body.value !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['truth_value'],
        message:
          'empty_value_rejected: memory upserts send the value as truth_value (a JSON object); content and value are not accepted',
        params: { code: 'empty_value_rejected' }
      });
      return;
    }
    if (!isJsonObject(body.truth_value)) {
      ctx.addIssue({
        code: 'custom',
        path: ['truth_value'],
        message: 'value_must_be_object: truth_value must be a JSON object',
        params: { code: 'value_must_be_object' }
      });
    }
    const problem = keyProblem(body.key);
    if (problem) ctx.addIssue({ code: 'custom', path: ['key'], message: problem, params: { code: 'invalid_key' } });
  })
  // The refinement has checked that truth_value is a JSON object (it came from the strict JSON parser).
  .transform((body) => ({ key: body.key, truth_value: body.truth_value as { [key: string]: JsonValue } }));
export type MemoryUpsertBody = z.output<typeof memoryUpsertBody>;
