/** C2SP tile paths and widths (the spec's own examples), entry bundles, signed notes and the entry-size bound. */
import { generateKeyPairSync } from 'node:crypto';
import {
  entryBundle,
  leafBytesBound,
  MAX_TLOG_ENTRY_BYTES,
  parseTilePath,
  tilePath,
  tileWidthInTree
} from '../../core/tlog/tiles';
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { parseWitnessedLogs } from '../../core/config/tlog.node';
import { cosignatureVerifierKey } from '../../core/tlog/cosignature.node';
import {
  checkpointBody,
  noteKeyId,
  noteVerifierKey,
  parseCheckpoint,
  signNote,
  verifyNote
} from '../../core/tlog/signed-note.node';

describe('tile paths', () => {
  it('encodes and parses indices in 3-digit elements with x prefixes', () => {
    expect(tilePath(0, 1234067)).toBe('0/x001/x234/067');
    expect(tilePath('entries', 5, 17)).toBe('entries/005.p/17');
    expect(tilePath(2, 1000)).toBe('2/x001/000');
    expect(parseTilePath('0/x001/x234/067')).toEqual({ kind: 'hashes', level: 0, index: 1234067, width: null });
    expect(parseTilePath('entries/001.p/65')).toEqual({ kind: 'entries', index: 1, width: 65 });
    expect(parseTilePath('3/000.p/1')).toEqual({ kind: 'hashes', level: 3, index: 0, width: 1 });
  });

  it.each([
    '0/1',
    '01/000',
    '64/000',
    '0/x001',
    '0/001/x002',
    '0/001.p/0',
    '0/001.p/256',
    'entries/000.p/01',
    'x/000',
    ''
  ])('refuses %j with 400 invalid_request', (p) => {
    expect(() => parseTilePath(p)).toThrow(expect.objectContaining({ code: 'invalid_request', status: 400 }));
  });

  it('widths as in the spec: a tree of 70,000 has 273 full level-0 tiles, one of 112, a full level-1 tile, one of 17, one of 1', () => {
    expect(tileWidthInTree(0, 272, 70_000)).toBe(256);
    expect(tileWidthInTree(0, 273, 70_000)).toBe(112);
    expect(tileWidthInTree(0, 274, 70_000)).toBe(0);
    expect(tileWidthInTree(1, 0, 70_000)).toBe(256);
    expect(tileWidthInTree(1, 1, 70_000)).toBe(17);
    expect(tileWidthInTree(2, 0, 70_000)).toBe(1);
    expect(tileWidthInTree(3, 0, 70_000)).toBe(0);
    expect(tileWidthInTree(1, 0, 256)).toBe(1);
  });
});

describe('entry bundles and the entry bound', () => {
  it('prefixes each entry with its big-endian uint16 length, refusing longer ones', () => {
    expect(entryBundle([Buffer.from('ab'), Buffer.alloc(0)]).toString('hex')).toBe('000261620000');
    expect(() => entryBundle([Buffer.alloc(MAX_TLOG_ENTRY_BYTES + 1)])).toThrow(RangeError);
  });

  it('bounds an entry whatever its seq and time', () => {
    const fields = { kind: 'truth' as const, key: 'a.b', truth_type: 'data', did: 'did:example:x' };
    const value = '{"v":1}';
    const actual = ledgerLeafBytes(
      { ...fields, seq: 123456, event_id: 'truth-0mx0a8atu602d1d91f5c1', created_at: new Date().toISOString() },
      value
    ).length;
    expect(leafBytesBound(fields, value)).toBeGreaterThanOrEqual(actual);
    expect(leafBytesBound(fields, value) - actual).toBeLessThan(16);
  });
});

describe('signed notes', () => {
  it('signs a checkpoint that verifies with its verifier key and with no other', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    const origin = 'example.com/log';
    const note = signNote(checkpointBody(origin, 7, 'ab'.repeat(32)), origin, privateKey, raw);
    const key = noteVerifierKey(origin, raw);
    expect(key).toBe(
      `${origin}+${noteKeyId(origin, raw).toString('hex')}+${Buffer.concat([Buffer.from([1]), raw]).toString('base64')}`
    );
    const text = verifyNote(note, key);
    expect(parseCheckpoint(text!)).toEqual({ origin, size: 7, rootHex: 'ab'.repeat(32) });
    expect(verifyNote(note.replace('\n7\n', '\n8\n'), key)).toBeNull();
    expect(verifyNote(note, noteVerifierKey('other.example/log', raw))).toBeNull();
  });

  it('reads verifier keys whose base64 holds a "+"', () => {
    let tried = 0;
    for (;;) {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
      const key = noteVerifierKey('example.com/log', raw);
      if (key.split('+').length <= 3 && ++tried < 200) continue;
      const note = signNote(checkpointBody('example.com/log', 1, '00'.repeat(32)), 'example.com/log', privateKey, raw);
      expect(verifyNote(note, key)).not.toBeNull();
      return;
    }
  });
});

describe('TLOG_WITNESSED_LOGS', () => {
  const key = (name: string) => {
    const { publicKey } = generateKeyPairSync('ed25519');
    return noteVerifierKey(name, Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url'));
  };

  it('reads verifier keys (origin = key name) and `<origin> <key>` entries, grouping keys by origin', () => {
    const [a, b, c] = [key('a.test/log'), key('a.test/log'), key('signer.test')];
    expect(parseWitnessedLogs(`${a}, ${b}\nb.test/log ${c}`)).toEqual([
      { origin: 'a.test/log', verifierKeys: [a, b] },
      { origin: 'b.test/log', verifierKeys: [c] }
    ]);
  });

  it('refuses a key whose key id is not its own, a cosignature key, or an origin with a space', () => {
    const good = key('a.test/log');
    const wrongId = good.replace(
      /\+([0-9a-f]{8})\+/,
      (_m, id: string) => `+${id === '00000000' ? '11111111' : '00000000'}+`
    );
    const cosigner = cosignatureVerifierKey('a.test/log', Buffer.alloc(32, 7));
    const issues: string[] = [];
    const ctx = { addIssue: (issue: { message: string }) => issues.push(issue.message) } as never;
    expect(parseWitnessedLogs(`${wrongId},${cosigner},a b ${good}`, ctx)).toEqual([]);
    expect(issues).toHaveLength(3);
  });
});
