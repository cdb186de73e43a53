/**
 * RFC 8785 canonical JSON (JCS), as the hub hashes ledger entries: object members sorted by UTF-16 code units, no
 * white space, numbers and strings as ECMAScript's JSON.stringify writes them. The SDK recomputes leaf hashes with
 * it, so it must give the hub's bytes for every value that came from JSON.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no NaN or Infinity');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
      const record = value as Record<string, unknown>;
      // Plain `<` on strings compares UTF-16 code units, the order RFC 8785 asks for.
      const keys = Object.keys(record)
        .filter((k) => record[k] !== undefined)
        .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot encode a ${typeof value}`);
  }
}

/** The fields of a ledger entry its leaf hash covers (docs/ledger.md, "Recomputing the Merkle root"). */
export interface LeafFields {
  seq: number;
  event_id: string;
  kind: 'truth' | 'event';
  key: string;
  truth_type: string | null;
  did: string | null;
  created_at: string;
  value: unknown;
}

/** The entry's leaf bytes: UTF-8 of the canonical JSON of its eight fields. */
export function leafBytes(fields: LeafFields): Buffer {
  return Buffer.from(
    canonicalJson({
      created_at: fields.created_at,
      did: fields.did ?? null,
      event_id: fields.event_id,
      key: fields.key,
      kind: fields.kind,
      seq: fields.seq,
      truth_type: fields.truth_type ?? null,
      value: fields.value
    }),
    'utf8'
  );
}
