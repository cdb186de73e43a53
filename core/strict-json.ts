/**
 * Strict JSON input (I-JSON, RFC 7493) for every JSON body the service accepts. The ledger attests a hash of what
 * it stored, so it must store exactly the meaning the client sent, and must be able to serve it back forever:
 *   - nesting deeper than a configured limit is refused (JSON_MAX_DEPTH; read paths recurse, the stack does not grow);
 *   - duplicate member names are refused (JSON.parse keeps the last one silently);
 *   - lone surrogates (`"\ud800"`) are refused: RFC 8785, which defines the ledger's leaf bytes, forbids them;
 *   - numbers must survive as the client wrote them: non-finite (`1e400`), underflowing (`1e-400`), integers
 *     outside ±(2^53-1), and decimals with more precision than an IEEE 754 double carries are refused;
 *   - `__proto__` members and `constructor.prototype` are refused (prototype poisoning, as Fastify's default parser).
 * Invalid UTF-8 and a byte order mark are refused by the body parser (api/plugins/json-body.ts) before this runs.
 *
 * The scanner is one iterative pass over the text (no recursion, so no input can overflow the stack) that only
 * checks; values are then built by JSON.parse, whose result is exactly what was checked. No maintained library does
 * all of these checks in one pass (duplicate detection needs the decoded member names; exactness needs the number's
 * source text, which JSON.parse's reviver does not receive on Node 20).
 */

export type JsonProblemCode =
  | 'invalid_json'
  | 'json_too_deep'
  | 'duplicate_member'
  | 'lone_surrogate'
  | 'noncharacter'
  | 'number_out_of_range'
  | 'number_too_precise';

export class JsonInputError extends Error {
  constructor(
    readonly code: JsonProblemCode,
    message: string,
    /** Where, as a dotted path from the document root (`value.a.0`), or '' for the root. */
    readonly path: string,
    /** Offset in the text (UTF-16 code units). */
    readonly position: number
  ) {
    super(message);
    this.name = 'JsonInputError';
  }
}

interface Frame {
  kind: 'object' | 'array';
  /** Member names seen so far (objects). */
  names?: Set<string>;
  /** The current member name (objects) or index (arrays), for error paths. */
  at: string | number;
  /** This object is the value of a member named "constructor" (prototype poisoning check). */
  constructorValue?: boolean;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
/** Longest number accepted: room for 17 significant digits, a sign, a point, leading zeros and an exponent. */
const MAX_NUMBER_LENGTH = 64;

/** Checks `text` against the rules above and returns JSON.parse(text). Throws JsonInputError. */
export function parseStrictJson(text: string, maxDepth: number): unknown {
  scanStrictJson(text, maxDepth);
  return JSON.parse(text);
}

export function scanStrictJson(text: string, maxDepth: number): void {
  const stack: Frame[] = [];
  let i = 0;
  const n = text.length;

  const pathOf = (): string => stack.map((f) => String(f.at)).join('.');
  const fail = (code: JsonProblemCode, message: string, at = i): never => {
    throw new JsonInputError(code, message, pathOf(), at);
  };
  const skipWs = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const syntax = (what: string): never =>
    fail(
      'invalid_json',
      i >= n
        ? `Unexpected end of JSON input (expected ${what})`
        : `Unexpected character ${JSON.stringify(text[i])} at position ${i} (expected ${what})`
    );

  const noncharacter = (at: number, cp: number): never =>
    fail(
      'noncharacter',
      `A string contains the noncharacter U+${cp.toString(16).toUpperCase().padStart(4, '0')}, which I-JSON excludes (RFC 7493 §2.1)`,
      at
    );
  /** U+FDD0-U+FDEF and the last two code points of every plane. */
  const isNoncharacter = (cp: number) => (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe;

  /** Scans a string starting at the opening quote; returns the index after the closing quote. */
  const scanString = (): number => {
    const start = i;
    i++; // opening quote
    let pendingHigh = -1; // position of an escaped high surrogate awaiting its low half
    let highUnit = 0; // that escape's code unit
    for (;;) {
      if (i >= n) fail('invalid_json', 'Unterminated string', start);
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        if (pendingHigh >= 0)
          fail(
            'lone_surrogate',
            'A string contains an unpaired surrogate escape (\\ud800-\\udbff without its low half)',
            pendingHigh
          );
        i++;
        return i;
      }
      if (c < 0x20)
        fail('invalid_json', `Control character U+${c.toString(16).padStart(4, '0')} must be escaped in a string`);
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === 'u') {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('invalid_json', 'Bad \\u escape in a string');
          const unit = parseInt(hex, 16);
          if (unit >= 0xdc00 && unit <= 0xdfff) {
            if (pendingHigh < 0)
              fail('lone_surrogate', 'A string contains an unpaired low surrogate escape (\\udc00-\\udfff)');
            const cp = 0x10000 + ((highUnit - 0xd800) << 10) + (unit - 0xdc00);
            if (isNoncharacter(cp)) noncharacter(pendingHigh, cp);
            pendingHigh = -1;
          } else {
            if (pendingHigh >= 0)
              fail(
                'lone_surrogate',
                'A string contains an unpaired surrogate escape (\\ud800-\\udbff without its low half)',
                pendingHigh
              );
            if (unit >= 0xd800 && unit <= 0xdbff) {
              pendingHigh = i;
              highUnit = unit;
            } else if (isNoncharacter(unit)) {
              noncharacter(i, unit);
            }
          }
          i += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) fail('invalid_json', 'Bad escape in a string');
        if (pendingHigh >= 0)
          fail(
            'lone_surrogate',
            'A string contains an unpaired surrogate escape (\\ud800-\\udbff without its low half)',
            pendingHigh
          );
        i += 2;
        continue;
      }
      if (pendingHigh >= 0)
        fail(
          'lone_surrogate',
          'A string contains an unpaired surrogate escape (\\ud800-\\udbff without its low half)',
          pendingHigh
        );
      // Raw surrogates can only be well-formed pairs: the text came from a fatal UTF-8 decode.
      if (c >= 0xd800 && c <= 0xdbff) {
        const cp = text.codePointAt(i)!;
        if (isNoncharacter(cp)) noncharacter(i, cp);
        i += 2;
        continue;
      }
      if (isNoncharacter(c)) noncharacter(i, c);
      i++;
    }
  };

  const scanNumber = () => {
    const start = i;
    if (text[i] === '-') i++;
    if (text[i] === '0') i++;
    else if (text[i]! >= '1' && text[i]! <= '9') while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    else syntax('a digit');
    let integral = true;
    if (text[i] === '.') {
      integral = false;
      i++;
      if (!(text[i]! >= '0' && text[i]! <= '9')) syntax('a digit after the decimal point');
      while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    }
    if (text[i] === 'e' || text[i] === 'E') {
      integral = false;
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (!(text[i]! >= '0' && text[i]! <= '9')) syntax('a digit in the exponent');
      while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    }
    checkNumber(text.slice(start, i), integral, (code, message) => fail(code, message, start));
  };

  const openContainer = (kind: 'object' | 'array', constructorValue: boolean) => {
    if (stack.length >= maxDepth) fail('json_too_deep', `JSON nests deeper than ${maxDepth} levels`);
    stack.push(kind === 'object' ? { kind, names: new Set(), at: '', constructorValue } : { kind, at: 0 });
    i++;
  };

  // A small state machine: 'value' expects a value; 'after' a separator or a closing bracket; 'name' a member name.
  let state: 'value' | 'after' | 'name' | 'first-name' | 'first-value' = 'value';
  let valueIsConstructor = false;
  skipWs();
  for (;;) {
    if (state === 'value' || state === 'first-value') {
      skipWs();
      const c = text[i];
      if (state === 'first-value' && c === ']') {
        stack.pop();
        i++;
        state = 'after';
      } else if (c === '{') {
        openContainer('object', valueIsConstructor);
        state = 'first-name';
      } else if (c === '[') {
        openContainer('array', false);
        state = 'first-value';
      } else if (c === '"') {
        i = scanString();
        state = 'after';
      } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
        scanNumber();
        state = 'after';
      } else if (text.startsWith('true', i)) {
        i += 4;
        state = 'after';
      } else if (text.startsWith('false', i)) {
        i += 5;
        state = 'after';
      } else if (text.startsWith('null', i)) {
        i += 4;
        state = 'after';
      } else {
        syntax('a JSON value');
      }
      valueIsConstructor = false;
      continue;
    }
    if (state === 'name' || state === 'first-name') {
      skipWs();
      if (state === 'first-name' && text[i] === '}') {
        stack.pop();
        i++;
        state = 'after';
        continue;
      }
      if (text[i] !== '"') syntax('a member name in double quotes');
      const start = i;
      const end = scanString();
      const raw = text.slice(start + 1, end - 1);
      const name = raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw;
      const frame = stack[stack.length - 1]!;
      if (frame.names!.has(name))
        fail('duplicate_member', `Member name ${JSON.stringify(name)} appears twice in one object`, start);
      if (name === '__proto__') fail('invalid_json', 'A member named "__proto__" is not accepted', start);
      if (name === 'prototype' && frame.constructorValue)
        fail('invalid_json', 'A "constructor" member holding a "prototype" member is not accepted', start);
      frame.names!.add(name);
      frame.at = name;
      i = end;
      skipWs();
      if (text[i] !== ':') syntax("':' after a member name");
      i++;
      valueIsConstructor = name === 'constructor';
      state = 'value';
      continue;
    }
    // state === 'after'
    skipWs();
    const top = stack[stack.length - 1];
    if (!top) {
      if (i < n) syntax('the end of the input');
      return;
    }
    const c = text[i];
    if (c === ',') {
      i++;
      if (top.kind === 'array') {
        top.at = (top.at as number) + 1;
        state = 'value';
      } else {
        state = 'name';
      }
    } else if ((c === '}' && top.kind === 'object') || (c === ']' && top.kind === 'array')) {
      stack.pop();
      i++;
    } else {
      syntax(top.kind === 'object' ? "',' or '}'" : "',' or ']'");
    }
  }
}

/**
 * A number is accepted when the double it becomes prints back as the same decimal value (the shortest round-trip
 * form ECMAScript and RFC 8785 use), so the stored, hashed and returned value is the one the client sent.
 */
function checkNumber(lexeme: string, integral: boolean, fail: (code: JsonProblemCode, message: string) => never): void {
  // No double needs more than 17 significant digits and a 3-digit exponent; a longer number is refused before any
  // work that grows with its length.
  if (lexeme.length > MAX_NUMBER_LENGTH)
    fail(
      'number_too_precise',
      `a number of ${lexeme.length} characters is longer than any IEEE 754 double needs (at most ${MAX_NUMBER_LENGTH})`
    );
  const value = Number(lexeme);
  if (!Number.isFinite(value)) fail('number_out_of_range', `${lexeme} is outside the range of an IEEE 754 double`);
  const outOfIntegerRange = Number.isInteger(value) && Math.abs(value) > MAX_SAFE && Math.abs(value) < 1e21;
  const rangeMessage = `${lexeme} is an integer outside ±(2^53-1), the integers JSON carries exactly (RFC 7493 §2.2)`;
  if (integral) {
    if (Math.abs(value) > MAX_SAFE) fail('number_out_of_range', rangeMessage);
    return; // every integer within that range is exact
  }
  const sent = decimalOf(lexeme);
  const kept = decimalOf(String(value));
  if (sent.digits !== '0' && kept.digits === '0')
    fail('number_out_of_range', `${lexeme} is too small for an IEEE 754 double (it would become 0)`);
  if (sent.digits !== kept.digits || sent.exponent !== kept.exponent) {
    fail(
      'number_too_precise',
      `${lexeme} cannot be carried exactly by an IEEE 754 double (it would become ${String(value)})`
    );
  }
  // Integers beyond ±(2^53-1) are refused however they are written (1e16 would be served as 10000000000000000), up
  // to 1e21, from where ECMAScript (and so the canonical form) writes them with an exponent, as floats.
  if (outOfIntegerRange) fail('number_out_of_range', rangeMessage);
}

/** A decimal as significant digits and the exponent of the last one: 12.50 → { digits: '125', exponent: -1 }. */
function decimalOf(text: string): { digits: string; exponent: number } {
  const m = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return { digits: text, exponent: 0 };
  const intPart = m[1]!;
  const frac = m[2] ?? '';
  let start = 0;
  const all = intPart + frac;
  while (start < all.length && all.charCodeAt(start) === 0x30) start++;
  let digits = all.slice(start);
  let exponent = Number(m[3] ?? 0) - frac.length;
  if (digits === '') return { digits: '0', exponent: 0 };
  // A loop, not /0+$/: that regex is quadratic on a long run of zeros followed by another digit.
  let end = digits.length;
  while (end > 1 && digits.charCodeAt(end - 1) === 0x30) end--;
  exponent += digits.length - end;
  digits = digits.slice(0, end);
  return { digits, exponent };
}

/** How deeply a value nests (a scalar is 0, `{}` and `[]` are 1), without recursion. */
export function jsonDepth(value: unknown): number {
  let deepest = 0;
  const work: [unknown, number][] = [[value, 0]];
  while (work.length > 0) {
    const [item, depth] = work.pop()!;
    if (item === null || typeof item !== 'object') {
      deepest = Math.max(deepest, depth);
      continue;
    }
    deepest = Math.max(deepest, depth + 1);
    for (const child of Array.isArray(item) ? item : Object.values(item)) work.push([child, depth + 1]);
  }
  return deepest;
}
