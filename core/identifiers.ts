/**
 * One maximum per kind of identifier and one rule for human-readable text, shared by every route that creates or
 * accepts them, so an identifier the service accepted once is accepted everywhere it is used (a DID registered by
 * POST /admin/dids can always be revoked by POST /admin/dids/<did>/revoke).
 */
import { z } from 'zod';

/**
 * The router's limit on one path parameter: above every identifier maximum, so a well-formed identifier always
 * reaches its route's schema (which names the real limit); a longer segment is 414 uri_too_long.
 */
export const MAX_PATH_PARAM_LENGTH = 512;

/** DIDs (`did:<method>:<id>`): registered by administrators, sent as X-DID, revoked by path. */
export const DID_MAX_LENGTH = 256;
export const DID_PATTERN = /^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$/;
/** A DID as it may be used (revoked, looked up): up to the router's limit, so one registered before DIDs had a
 * maximum can still be revoked. New DIDs are created with didSchema. */
export const usedDidSchema = z
  .string()
  .max(MAX_PATH_PARAM_LENGTH)
  .regex(DID_PATTERN, 'must look like did:<method>:<id>');
export const didSchema = z
  .string()
  .max(DID_MAX_LENGTH, `a DID has at most ${DID_MAX_LENGTH} characters`)
  .regex(DID_PATTERN, 'must look like did:<method>:<id>');

/** Node ids: ext-<brand>-<hub-wide sequence>, e.g. ext-openai-000123. */
export const NODE_ID_MAX_LENGTH = 64;

/**
 * Text people read (node names, labels, titles, reasons): no control characters (C0, DEL, C1) and no bidirectional
 * embeddings, overrides or isolates (U+202A-U+202E, U+2066-U+2069), which can make a name display as another.
 * `multiline` allows line feeds and tabs (reasons, rationales).
 */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const CONTROL_OR_NEWLINE = /[\u0000-\u001f\u007f-\u009f]/;
const BIDI = /[\u202a-\u202e\u2066-\u2069]/;

export function humanText(max: number, options: { multiline?: boolean; min?: number } = {}) {
  const control = options.multiline ? CONTROL : CONTROL_OR_NEWLINE;
  // The length and character rules read the text as sent (as the documented pattern and maxLength do), then it is
  // trimmed: a line feed, tab or vertical tab at either end of a one-line text is refused, never trimmed away.
  return z
    .string()
    .max(max)
    .refine(
      (s) => !control.test(s),
      options.multiline
        ? 'must not contain control characters other than line feeds and tabs'
        : 'must not contain control characters'
    )
    .refine(
      (s) => !BIDI.test(s),
      'must not contain bidirectional embedding, override or isolate characters (U+202A-U+202E, U+2066-U+2069)'
    )
    .trim()
    .min(options.min ?? 1)
    .meta({ pattern: humanTextPattern(options.multiline ?? false, (options.min ?? 1) > 0) });
}

/**
 * The same rule as a JSON Schema pattern (ECMA-262), for the OpenAPI document: only allowed characters and, when the
 * text may not be empty, at least one that trimming keeps (neither white space nor excluded). No lookahead, so
 * generators (schemathesis) can draw from it directly.
 */
function humanTextPattern(multiline: boolean, nonEmpty: boolean): string {
  const allowed = `[^${multiline ? '\\u0000-\\u0008\\u000b-\\u001f' : '\\u0000-\\u001f'}\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]`;
  const kept =
    '[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028-\\u202f\\u205f\\u2066-\\u2069\\u3000\\ufeff]';
  return nonEmpty ? `^${allowed}*${kept}${allowed}*$` : `^${allowed}*$`;
}

/**
 * An integer in a query string, from `min` up to `max` (by default the largest integer a JSON number carries exactly,
 * 2^53-1). Digits only: an empty value (`?offset=`) is refused, not read as 0 as z.coerce.number would. Documented in
 * OpenAPI as the integer it is, with both bounds, so a client never sends a value the route refuses.
 */
export function queryInt(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return z
    .string()
    .regex(/^-?\d{1,16}$/, 'an integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max, `must be at most ${max}`))
    .meta({ type: 'integer', minimum: min, maximum: max });
}
