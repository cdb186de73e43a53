/**
 * The witnessed logs and the witnesses of this hub's log as the settings and the peer registry's pins together
 * (services/tlog/peer-witnesses.ts), and the k-of-n policy over them as they change (services/tlog/cosigned.ts).
 * Pure: no stack.
 */
import { generateKeyPairSync } from 'node:crypto';
import { checkpointKeyProblem, parseLogWitnesses, witnessKeyProblem } from '../../../core/config/tlog.node';
import { cosignatureVerifierKey } from '../../../core/tlog/cosignature.node';
import { noteVerifierKey } from '../../../core/tlog/signed-note.node';
import { createPeerWitnesses, mergeTlogSets, type ConfiguredWitness } from '../../../services/tlog/peer-witnesses';
import { createWitnessPolicy } from '../../../services/tlog/cosigned';
import type { PeerDocument } from '../../../store/federation/peers';
import type { CosignatureStore, WitnessProgress } from '../../../store/tlog/cosignatures';

const raw = () =>
  Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x as string, 'base64url');
const logKey = (origin: string) => noteVerifierKey(origin, raw());
const witnessKey = (name: string) => cosignatureVerifierKey(name, raw());

const self = { origin: 'self.test/tlog', witnessName: 'self.test/tlog/witness' };

function peer(id: string, tlog: PeerDocument['tlog']): PeerDocument {
  return {
    _id: id,
    name: id,
    agent_card_url: `https://${id}.test/card`,
    added_at: '',
    last_contact_at: null,
    last_probe_at: '',
    last_status: 'unreachable',
    last_error: null,
    card_name: null,
    card_version: null,
    tlog
  };
}
const pins = (url: string, verifier_key: string | null, witness_key: string | null) => ({
  url,
  verifier_key,
  witness_key,
  pinned_at: ''
});

describe('the settings and the peer registry together', () => {
  const settingLog = logKey('a.test/tlog');
  const settingWitness = witnessKey('a.test/tlog/witness');
  const settings = {
    witnessedLogs: [{ origin: 'a.test/tlog', verifierKeys: [settingLog] }],
    witnesses: parseLogWitnesses(`${settingWitness} https://a.test/tlog`),
    quorum: null
  };

  it("adds each peer's pinned checkpoint key to its origin and its witness key as a witness at its log prefix", () => {
    const bLog = logKey('b.test/tlog');
    const bWitness = witnessKey('b.test/tlog/witness');
    const aSecondKey = logKey('a.test/tlog');
    const sets = mergeTlogSets(
      settings,
      [
        peer('hub-b', pins('https://b.test/tlog/', bLog, bWitness)),
        peer('hub-a', pins('https://a.test/tlog', aSecondKey, null))
      ],
      self
    );
    expect(sets.witnessedLogs).toEqual([
      { origin: 'a.test/tlog', verifierKeys: [settingLog, aSecondKey] },
      { origin: 'b.test/tlog', verifierKeys: [bLog] }
    ]);
    expect(sets.witnesses).toEqual([
      { name: 'a.test/tlog/witness', verifierKey: settingWitness, url: 'https://a.test/tlog', peer_id: null },
      { name: 'b.test/tlog/witness', verifierKey: bWitness, url: 'https://b.test/tlog', peer_id: 'hub-b' }
    ]);
  });

  it('never takes this hub itself, a witness name already there, a peer without pins, or a malformed pin', () => {
    const sets = mergeTlogSets(
      settings,
      [
        peer('hub-c', pins('https://c.test/tlog', logKey(self.origin), witnessKey(self.witnessName))),
        peer('hub-d', pins('https://d.test/tlog', null, witnessKey('a.test/tlog/witness'))),
        peer('hub-e', null),
        peer('hub-f', pins('https://f.test/tlog', 'f.test/tlog+00000000+AAAA', 'nonsense')),
        { ...peer('hub-g', null), tlog: undefined }
      ],
      self
    );
    expect(sets.witnessedLogs).toEqual(settings.witnessedLogs);
    expect(sets.witnesses.map((w) => [w.name, w.peer_id])).toEqual([['a.test/tlog/witness', null]]);
  });

  it('refuses malformed keys by kind: a witness key is no checkpoint key, a wrong key id is neither', () => {
    const good = logKey('b.test/tlog');
    const wrongId = good.replace(/\+[0-9a-f]{8}\+/, (m) => (m === '+00000000+' ? '+11111111+' : '+00000000+'));
    expect(checkpointKeyProblem(good)).toBeNull();
    expect(checkpointKeyProblem(wrongId)).toMatch(/not a checkpoint verifier key/);
    expect(checkpointKeyProblem(witnessKey('b.test/tlog'))).toMatch(/not a checkpoint verifier key/);
    expect(witnessKeyProblem(witnessKey('b.test/w'))).toBeNull();
    expect(witnessKeyProblem(good)).toMatch(/not a cosignature\/v1 verifier key/);
  });

  it('reads the registry again on refresh, and keeps the last copy when a read fails', async () => {
    const bWitness = witnessKey('b.test/tlog/witness');
    let list: PeerDocument[] = [peer('hub-b', pins('https://b.test/tlog', null, bWitness))];
    let fail = false;
    const sets = createPeerWitnesses({
      peers: { list: async () => (fail ? Promise.reject(new Error('down')) : list) },
      settings,
      self,
      logger: { warn: () => undefined }
    });
    expect(sets.witnesses()).toHaveLength(1);
    await sets.refresh();
    expect(sets.witnesses().map((w) => w.name)).toEqual(['a.test/tlog/witness', 'b.test/tlog/witness']);
    fail = true;
    await expect(sets.refresh()).rejects.toThrow('down');
    expect(sets.witnesses()).toHaveLength(2);
    fail = false;
    list = [];
    await sets.refresh();
    expect(sets.witnesses()).toHaveLength(1);
    expect(sets.quorum(5)).toBe(5);
  });
});

describe('the k-of-n policy as witnesses come and go', () => {
  const progress = (name: string, verifier_key: string, sizes: number[]): WitnessProgress => ({
    name,
    verifier_key,
    state: sizes.length ? 'cosigned' : 'pending',
    cosigned_size: Math.max(0, ...sizes),
    witness_size: null,
    reason: null,
    attempted_at: null,
    cosigned_at: null,
    sizes
  });
  const w = (name: string, peer_id: string | null): ConfiguredWitness => ({
    name,
    verifierKey: `key of ${name}`,
    url: `https://${name}`,
    peer_id
  });
  // B cosigned 5 and 7, C only 5.
  const cosigned: Record<string, number[]> = { b: [5, 7], c: [5] };
  const store = {
    progress: async (name: string, key: string) => progress(name, key, cosigned[name] ?? []),
    cosignature: async (name: string, size: number) =>
      (cosigned[name] ?? []).includes(size)
        ? {
            size,
            root: `root${size}`,
            line: `— ${name} x\n`,
            timestamp: 1,
            verifier_key: `key of ${name}`,
            stored_at: ''
          }
        : null
  } as unknown as CosignatureStore;

  it('counts k over the witnesses of the moment; unset k is all of them; a removed witness counts no more', async () => {
    let witnesses = [w('b', 'hub-b')];
    let k: number | null = null;
    const policy = createWitnessPolicy({ store, witnesses: () => witnesses, quorum: (n) => k ?? n });
    expect((await policy.witnessed(100))?.size).toBe(7);
    witnesses = [w('b', 'hub-b'), w('c', null)];
    expect(await policy.witnessed(100)).toMatchObject({ size: 5, lines: ['— b x\n', '— c x\n'] });
    const status = await policy.progress();
    expect(status).toMatchObject({ k: 2, n: 2, witnessed_size: 5 });
    expect(status.witnesses.map((s) => [s.name, s.peer_id])).toEqual([
      ['b', 'hub-b'],
      ['c', null]
    ]);
    k = 1;
    expect((await policy.witnessed(100))?.size).toBe(7);
    // k above the witnesses there are: nothing counts as witnessed (k is never lowered behind the operator's back).
    k = 2;
    witnesses = [w('c', null)];
    expect(await policy.witnessed(100)).toBeNull();
    expect(await policy.progress()).toMatchObject({ k: 2, n: 1, witnessed_size: null });
  });

  it('serves a cosignature on a checkpoint only once the progress /api/status reads lists it', async () => {
    // C's cosignature of 7 is stored, its progress not yet written (the moment between the two writes).
    const stored = {
      ...store,
      cosignature: async (name: string, size: number) =>
        store.cosignature(name, size === 7 ? 5 : size).then((c) => c && { ...c, size, root: `root${size}` })
    } as unknown as CosignatureStore;
    const policy = createWitnessPolicy({
      store: stored,
      witnesses: () => [w('b', null), w('c', null)],
      quorum: () => 2
    });
    expect(await policy.cosignaturesOf(7, 'root7')).toEqual(['— b x\n']);
    expect(await policy.cosignaturesOf(5, 'root5')).toEqual(['— b x\n', '— c x\n']);
  });
});
