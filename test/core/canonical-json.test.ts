/** RFC 8785 canonical JSON: the bytes we store, hash and return. The leaf bytes are a permanent contract. */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../core/ledger/canonical-json';
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { leafHash, toHex } from '../../core/ledger/merkle.node';

describe('canonical JSON', () => {
  it('sorts members by UTF-16 code units and drops white space', () => {
    expect(canonicalJson(JSON.parse('{ "b": 1, "a": [3, {"z": null, "y": true}], "A": "x" }'))).toBe(
      '{"A":"x","a":[3,{"y":true,"z":null}],"b":1}'
    );
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

  it('encodes values nested far deeper than any call stack', () => {
    const depth = 200_000;
    const value = JSON.parse('['.repeat(depth) + ']'.repeat(depth));
    expect(canonicalJson(value)).toBe('['.repeat(depth) + ']'.repeat(depth));
  });

  describe('RFC 8785 test vectors', () => {
    it('the example of §3.2.2 (numbers, string escapes, literals)', () => {
      const input =
        '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}';
      expect(canonicalJson(JSON.parse(input))).toBe(
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
      );
    });

    it('the property sorting of §3.2.3 (UTF-16 code units)', () => {
      const input =
        '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}';
      // Compared as text: Object.keys would list the integer-like "1" first whatever the order.
      expect(canonicalJson(JSON.parse(input))).toBe(
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
      );
    });

    it('the number serialisations of Appendix B', () => {
      const vectors: [string, string][] = [
        ['0000000000000000', '0'],
        ['8000000000000000', '0'],
        ['0000000000000001', '5e-324'],
        ['8000000000000001', '-5e-324'],
        ['7fefffffffffffff', '1.7976931348623157e+308'],
        ['ffefffffffffffff', '-1.7976931348623157e+308'],
        ['4340000000000000', '9007199254740992'],
        ['c340000000000000', '-9007199254740992'],
        ['4430000000000000', '295147905179352830000'],
        ['44b52d02c7e14af5', '9.999999999999997e+22'],
        ['44b52d02c7e14af6', '1e+23'],
        ['44b52d02c7e14af7', '1.0000000000000001e+23'],
        ['444b1ae4d6e2ef4e', '999999999999999700000'],
        ['444b1ae4d6e2ef4f', '999999999999999900000'],
        ['444b1ae4d6e2ef50', '1e+21'],
        ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
        ['3eb0c6f7a0b5ed8d', '0.000001'],
        ['41b3de4355555553', '333333333.3333332'],
        ['41b3de4355555554', '333333333.33333325'],
        ['41b3de4355555555', '333333333.3333333'],
        ['41b3de4355555556', '333333333.3333334'],
        ['41b3de4355555557', '333333333.33333343'],
        ['becbf647612f3696', '-0.0000033333333333333333'],
        ['43143ff3c1cb0959', '1424953923781206.2']
      ];
      for (const [bits, expected] of vectors) {
        const value = Buffer.from(bits, 'hex').readDoubleBE(0);
        expect({ bits, text: canonicalJson(value) }).toEqual({ bits, text: expected });
      }
      for (const bits of ['7fffffffffffffff', '7ff0000000000000', 'fff0000000000000']) {
        expect(() => canonicalJson(Buffer.from(bits, 'hex').readDoubleBE(0))).toThrow();
      }
    });
  });

  it('pins the leaf bytes and leaf hash of one entry (a permanent contract: every stored root depends on it)', () => {
    const bytes = ledgerLeafBytes(
      {
        created_at: '2026-11-20T10:15:00.000Z',
        did: 'did:example:node-1',
        event_id: 'truth-0001',
        key: 'mysystem.deploy.x',
        kind: 'truth',
        seq: 2,
        truth_type: 'data'
      },
      canonicalJson({ é: [1, { 'a.b': null }], version: '1.4.2' })
    );
    expect(bytes.toString('utf8')).toBe(
      '{"created_at":"2026-11-20T10:15:00.000Z","did":"did:example:node-1","event_id":"truth-0001","key":"mysystem.deploy.x","kind":"truth","seq":2,"truth_type":"data","value":{"version":"1.4.2","é":[1,{"a.b":null}]}}'
    );
    // SHA-256(0x00 ‖ bytes), checked independently with Python's hashlib and json (sort_keys, compact separators).
    expect(toHex(leafHash(bytes))).toBe('ad4ee574c8cf26ecebe9666d5588fc96a299fe8254de270bd932b740a489b62e');
    expect(
      createHash('sha256')
        .update(Buffer.concat([Buffer.from([0]), bytes]))
        .digest('hex')
    ).toBe('ad4ee574c8cf26ecebe9666d5588fc96a299fe8254de270bd932b740a489b62e');
  });
});
