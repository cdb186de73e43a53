/**
 * JSON text that the service already holds in canonical form (a ledger entry's value, a task payload, a tree
 * version) and returns as it is, spliced into the response by the API's serializer (api/plugins/json-body.ts)
 * instead of being parsed and re-serialised. Serving the stored text keeps reads exact and cheap, and means no
 * stored value can make a read fail (re-serialising a deeply nested value would overflow the stack).
 */
import { z } from 'zod';
import type { JsonValue } from './ledger/canonical-json';

export class RawJson {
  /**
   * Non-zero while the API's serializer runs: it swaps each RawJson for its text, so toJSON (which JSON.stringify
   * calls first) need not parse it.
   */
  static splicing = 0;

  constructor(readonly text: string) {}

  /** For serialisers that do not know RawJson (logs, JSON.stringify without the API's replacer): the parsed value. */
  toJSON(): JsonValue {
    return RawJson.splicing > 0 ? null : (JSON.parse(this.text) as JsonValue);
  }
}

/**
 * The response schema of a RawJson member: checked to be a RawJson when the reply is serialised, documented in the
 * OpenAPI document as what it holds (a JSON object by default).
 */
export function rawJsonSchema(
  description: string,
  jsonSchema: Record<string, unknown> = { type: 'object', additionalProperties: true }
) {
  return z.custom<RawJson>((v) => v instanceof RawJson, 'a stored JSON value').meta({ ...jsonSchema, description });
}
