/** RFC 8785 canonical JSON: the bytes we store, hash and return. */
import { canonicalJson } from '../../core/canonical-json';

describe('canonical JSON', () => {
  it('sorts members by UTF-16 code units and drops white space', () => {
    expect(canonicalJson(JSON.parse('{ "b": 1, "a": [3, {"z": null, "y": true}], "A": "x" }'))).toBe('{"A":"x","a":[3,{"y":true,"z":null}],"b":1}');
    // "€" (U+20AC) sorts before "😀" (U+D83D U+DE00) by code unit, though after it by code point in some orders
    expect(canonicalJson({ '😀': 1, '€': 2, '\r': 3 })).toBe('{"\\r":3,"€":2,"😀":1}');
  });

  it('writes numbers the ECMAScript way', () => {
    expect(canonicalJson([1e21, 0.1, -0, 1.5e-7, 100])).toBe('[1e+21,0.1,0,1.5e-7,100]');
  });

  it('keeps keys MongoDB cannot store as field names, nested arrays and NUL characters', () => {
    const value = { 'a.b': { $where: [[1, 2], []] }, nul: 'x\u0000y' };
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
  });

  it('refuses NaN and Infinity', () => {
    expect(() => canonicalJson({ x: NaN })).toThrow();
  });
});
