/**
 * The strict JSON scanner (I-JSON): it accepts exactly what JSON.parse accepts, minus what the ledger could not
 * attest exactly (duplicates, lone surrogates, inexact numbers, excessive depth, prototype members), without
 * recursion.
 */
import { jsonDepth, JsonInputError, parseStrictJson } from '../../core/strict-json';

const problem = (text: string, depth = 64) => {
  try {
    parseStrictJson(text, depth);
    return null;
  } catch (err) {
    if (!(err instanceof JsonInputError)) throw err;
    return { code: err.code, path: err.path };
  }
};

describe('strict JSON', () => {
  it('agrees with JSON.parse on random valid documents', () => {
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const strings = ['', 'a', 'é', '😀', '\u0000', '"\\', 'a.b', '$x', '\u2028'];
    const gen = (depth: number): unknown => {
      const r = rnd();
      if (depth > 5 || r < 0.3)
        return [null, true, false, Math.floor(rnd() * 1e6) - 5e5, rnd() * 1e3, -rnd(), 1e-300 * rnd(), 1e300 * rnd()][
          Math.floor(rnd() * 8)
        ];
      if (r < 0.45) return strings[Math.floor(rnd() * strings.length)];
      if (r < 0.7) return Array.from({ length: Math.floor(rnd() * 4) }, () => gen(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = 0; i < rnd() * 5; i++) o[`${strings[Math.floor(rnd() * strings.length)]}${i}`] = gen(depth + 1);
      return o;
    };
    for (let i = 0; i < 2000; i++) {
      const text = JSON.stringify(gen(0), null, i % 3 === 0 ? 2 : undefined);
      expect(parseStrictJson(text, 64)).toEqual(JSON.parse(text));
    }
  });

  it('refuses what JSON.parse refuses', () => {
    for (const text of [
      '',
      ' ',
      '{',
      '[1,]',
      '{"a":1,}',
      '{a:1}',
      "{'a':1}",
      '01',
      '1.',
      '.5',
      '+1',
      '-',
      '1e',
      'NaN',
      'Infinity',
      'tru',
      'nul',
      '"\\x"',
      '"\\u12"',
      '"a\tb"',
      '{"a" 1}',
      '[1 2]',
      '{} {}',
      '"'
    ]) {
      expect(() => JSON.parse(text)).toThrow();
      expect({ text, code: problem(text)?.code }).toEqual({ text, code: 'invalid_json' });
    }
  });

  it('refuses duplicate member names, also when escaped differently', () => {
    expect(problem('{"key":"a","key":"b"}')).toEqual({ code: 'duplicate_member', path: 'key' });
    expect(problem('{"a":{"k":1,"\\u006b":2}}')?.code).toBe('duplicate_member');
    expect(problem('[{"k":1},{"k":2}]')).toBeNull();
  });

  it('refuses unpaired surrogate escapes and accepts pairs', () => {
    expect(problem('{"\\ud800":1}')?.code).toBe('lone_surrogate');
    expect(problem('"\\udc00"')?.code).toBe('lone_surrogate');
    expect(problem('"\\ud800\\u0041"')?.code).toBe('lone_surrogate');
    expect(problem('"\\ud800x"')?.code).toBe('lone_surrogate');
    expect(problem('"\\ud83d\\ude00 and 😀"')).toBeNull();
  });

  it('refuses Unicode noncharacters, raw or escaped (RFC 7493 §2.1)', () => {
    expect(problem('"\\uffff"')?.code).toBe('noncharacter');
    expect(problem('"\\ufdd0"')?.code).toBe('noncharacter');
    expect(problem('"\uFFFE"')?.code).toBe('noncharacter');
    expect(problem('"\\ud83f\\udffe"')?.code).toBe('noncharacter'); // U+1FFFE
    expect(problem(`"${String.fromCodePoint(0x10ffff)}"`)?.code).toBe('noncharacter');
    expect(problem('"\\ufffd \\ud83d\\ude00 \uFDCF"')).toBeNull();
  });

  it('accepts numbers a double carries exactly and refuses the rest', () => {
    for (const ok of [
      '0',
      '-0',
      '1.50',
      '1E2',
      '5e-324',
      '1.7976931348623157e308',
      '9007199254740991',
      '-9007199254740991',
      '0.1',
      '1e300',
      '1e21',
      '123.456e-5',
      '1e007'
    ]) {
      expect({ ok, problem: problem(`[${ok}]`) }).toEqual({ ok, problem: null });
    }
    for (const [bad, code] of [
      ['1e400', 'number_out_of_range'],
      ['-1e400', 'number_out_of_range'],
      ['1e-400', 'number_out_of_range'],
      ['9007199254740992', 'number_out_of_range'],
      ['18446744073709551617', 'number_out_of_range'],
      ['3.141592653589793238', 'number_too_precise'],
      ['0.1000000000000000000000001', 'number_too_precise'],
      // Integers are refused beyond ±(2^53-1) however they are written: 1e16 would be served as 10000000000000000.
      ['1e16', 'number_out_of_range'],
      ['9007199254740992.0', 'number_out_of_range'],
      ['100000000000000000000000', 'number_out_of_range'],
      [`0.1${'0'.repeat(100)}1`, 'number_too_precise']
    ]) {
      expect({ bad, code: problem(`[${bad}]`)?.code }).toEqual({ bad, code });
    }
  });

  it('refuses a long number without work that grows with its length (a quadratic check was a denial of service)', () => {
    // The quadratic version took minutes at this length, far past the test timeout.
    expect(problem(`[0.1${'0'.repeat(500_000)}1]`)?.code).toBe('number_too_precise');
  });

  it('limits depth without recursion and names the path', () => {
    expect(problem('['.repeat(64) + ']'.repeat(64))).toBeNull();
    expect(problem('['.repeat(65) + ']'.repeat(65))?.code).toBe('json_too_deep');
    expect(problem('['.repeat(1_000_000))?.code).toBe('json_too_deep');
    expect(problem('{"a":[0,{"b":{}}]}', 3)).toEqual({ code: 'json_too_deep', path: 'a.1.b' });
  });

  it('refuses prototype members', () => {
    expect(problem('{"__proto__":{"x":1}}')?.code).toBe('invalid_json');
    expect(problem('{"a":{"constructor":{"prototype":{}}}}')?.code).toBe('invalid_json');
    expect(problem('{"constructor":1,"prototype":1}')).toBeNull();
  });

  it('measures depth iteratively', () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth({ a: [1, { b: [] }] })).toBe(4);
    expect(jsonDepth(JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)))).toBe(100_000);
  });
});
