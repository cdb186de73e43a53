/**
 * Canonical JSON (RFC 8785, JSON Canonicalization Scheme) for values that came from JSON.parse:
 * object members sorted by UTF-16 code units, no white space, numbers and strings as ECMAScript's JSON.stringify
 * writes them. The same bytes are stored, hashed and returned, so a value comes back exactly as canonicalised.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export function canonicalJson(value: unknown): string {
  // Iterative, with an explicit work stack: no value, however deeply nested, can overflow the call stack.
  const out: string[] = [];
  const work: unknown[] = [value];
  while (work.length > 0) {
    const item = work.pop();
    if (item instanceof Literal) {
      out.push(item.text);
      continue;
    }
    if (item === null) {
      out.push('null');
      continue;
    }
    switch (typeof item) {
      case 'boolean':
        out.push(item ? 'true' : 'false');
        break;
      case 'number':
        if (!Number.isFinite(item)) throw new TypeError('canonical JSON has no NaN or Infinity');
        out.push(JSON.stringify(item));
        break;
      case 'string':
        out.push(JSON.stringify(item));
        break;
      case 'object': {
        // Pushed in reverse, so they pop in order.
        if (Array.isArray(item)) {
          work.push(CLOSE_ARRAY);
          for (let i = item.length - 1; i >= 0; i--) {
            work.push(item[i] === undefined ? NULL : item[i]);
            if (i > 0) work.push(COMMA);
          }
          work.push(OPEN_ARRAY);
          break;
        }
        // Members whose value is undefined are left out, as JSON.stringify does.
        const record = item as Record<string, unknown>;
        const keys = Object.keys(record)
          .filter((k) => record[k] !== undefined)
          .sort(compareUtf16);
        work.push(CLOSE_OBJECT);
        for (let i = keys.length - 1; i >= 0; i--) {
          work.push(record[keys[i]!]);
          work.push(new Literal(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`));
        }
        work.push(OPEN_OBJECT);
        break;
      }
      default:
        throw new TypeError(`canonical JSON cannot encode a ${typeof item}`);
    }
  }
  return out.join('');
}

/** Punctuation on the work stack, told apart from string values by its class. */
class Literal {
  constructor(readonly text: string) {}
}
const OPEN_ARRAY = new Literal('[');
const CLOSE_ARRAY = new Literal(']');
const OPEN_OBJECT = new Literal('{');
const CLOSE_OBJECT = new Literal('}');
const COMMA = new Literal(',');
const NULL = new Literal('null');

function compareUtf16(a: string, b: string): number {
  // JS string comparison is by UTF-16 code units, which is what RFC 8785 asks for.
  return a < b ? -1 : a > b ? 1 : 0;
}

export function isJsonObject(value: unknown): value is { [key: string]: JsonValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
