/**
 * SLIM groups over real HTTP (API + worker on the embedded stack): three members whose key pairs exist only in this
 * test (node:crypto), unwrapping the epoch key with the documented zh-slim/v1 steps written out here independently
 * of the hub's code; encryption and decryption (by the hub and locally), tampering refused, a new epoch after a
 * member leaves (its old key refused), and group consensus with Ed25519 ballots: quorum, deadline, forged ballot.
 */
import {
  createCipheriv,
  createDecipheriv,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  KeyObject,
  randomBytes,
  sign
} from 'node:crypto';
import { eventually, http, startTestService, TestService } from '../support/service';

jest.setTimeout(180_000);
let svc: TestService;

interface Member {
  id: string;
  secret: string;
  token: string;
  x: { privateKey: KeyObject; publicKey: KeyObject };
  ed: { privateKey: KeyObject; publicKey: KeyObject };
}
const members: Member[] = [];
let outsider: Member;

const url = (p: string) => `${svc.urls.main}${p}`;
const rawX = (key: KeyObject) => key.export({ format: 'jwk' }).x!;
const publicJwk = (key: KeyObject) => ({
  kty: 'OKP',
  crv: key.asymmetricKeyType === 'x25519' ? 'X25519' : 'Ed25519',
  x: rawX(key)
});
const memberEntry = (m: Member) => ({
  member_id: m.id,
  x25519: publicJwk(m.x.publicKey),
  ed25519: publicJwk(m.ed.publicKey)
});
const asOAuth = (m: Member) => ({ authorization: `Bearer ${m.token}` });
const asGroup = (groupId: string, key: Buffer) => ({
  'x-slim-group': groupId,
  'x-slim-group-key': key.toString('base64url')
});

async function newMember(label: string): Promise<Member> {
  const client = await http('POST', url('/admin/oauth-clients'), {
    headers: { authorization: `Bearer ${svc.adminToken}` },
    body: { label, scopes: ['compute'] }
  });
  expect(client.status).toBe(201);
  const token = await http('POST', url('/v1/oauth/token'), {
    body: {
      grant_type: 'client_credentials',
      client_id: client.body.client_id,
      client_secret: client.body.client_secret
    }
  });
  expect(token.status).toBe(200);
  return {
    id: client.body.client_id,
    secret: client.body.client_secret,
    token: token.body.access_token,
    x: generateKeyPairSync('x25519'),
    ed: generateKeyPairSync('ed25519')
  };
}

/** What a member does, per docs/compute.md: X25519 with the epoch's ephemeral key, HKDF-SHA-256, AES-256-GCM. */
function unwrap(view: any, m: Member): Buffer {
  const wrap = view.wraps.find((w: any) => w.member_id === m.id);
  const eph = Buffer.from(view.ephemeral_public, 'base64url');
  const mine = Buffer.from(rawX(m.x.publicKey), 'base64url');
  const z = diffieHellman({
    privateKey: m.x.privateKey,
    publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: view.ephemeral_public }, format: 'jwk' })
  });
  const info = `zh-slim/v1 wrap|${view.group_id}|${view.epoch}|${m.id}`;
  const k = Buffer.from(hkdfSync('sha256', z, Buffer.concat([eph, mine]), info, 32));
  const data = Buffer.from(wrap.wrapped_key, 'base64url');
  const d = createDecipheriv('aes-256-gcm', k, Buffer.from(wrap.iv, 'base64url'));
  d.setAAD(Buffer.from(info));
  d.setAuthTag(data.subarray(-16));
  const key = Buffer.concat([d.update(data.subarray(0, -16)), d.final()]);
  const commitment = Buffer.from(
    hkdfSync('sha256', key, Buffer.alloc(0), `zh-slim/v1 commitment|${view.group_id}|${view.epoch}`, 32)
  ).toString('base64url');
  expect(commitment).toBe(view.commitment);
  return key;
}

const messageKey = (key: Buffer, groupId: string, epoch: number, salt: Buffer) =>
  Buffer.from(hkdfSync('sha256', key, salt, `zh-slim/v1 message|${groupId}|${epoch}`, 32));

function sealLocally(key: Buffer, groupId: string, epoch: number, text: string) {
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', messageKey(key, groupId, epoch, salt), iv);
  c.setAAD(Buffer.from(`zh-slim/v1 message|${groupId}|${epoch}`));
  const ct = Buffer.concat([c.update(text, 'utf8'), c.final(), c.getAuthTag()]);
  return {
    v: 1,
    group_id: groupId,
    epoch,
    salt: salt.toString('base64url'),
    iv: iv.toString('base64url'),
    ciphertext: ct.toString('base64url')
  };
}

function openLocally(key: Buffer, msg: any): string {
  const data = Buffer.from(msg.ciphertext, 'base64url');
  const d = createDecipheriv(
    'aes-256-gcm',
    messageKey(key, msg.group_id, msg.epoch, Buffer.from(msg.salt, 'base64url')),
    Buffer.from(msg.iv, 'base64url')
  );
  d.setAAD(Buffer.from(`zh-slim/v1 message|${msg.group_id}|${msg.epoch}`));
  d.setAuthTag(data.subarray(-16));
  return Buffer.concat([d.update(data.subarray(0, -16)), d.final()]).toString('utf8');
}

const ballot = (
  m: Member,
  groupId: string,
  epoch: number,
  consensusId: string,
  choice: 'approve' | 'reject',
  signer = m
) => ({
  action: 'vote',
  consensus_id: consensusId,
  member_id: m.id,
  choice,
  signature: sign(
    null,
    Buffer.from(`zh-slim/v1 ballot|${groupId}|${epoch}|${consensusId}|${m.id}|${choice}`),
    signer.ed.privateKey
  ).toString('base64url')
});

const secret = (m: Member, body: unknown) => http('POST', url('/v1/slim/group/secret'), { headers: asOAuth(m), body });

beforeAll(async () => {
  svc = await startTestService();
  for (const label of ['alice', 'bob', 'carol']) members.push(await newMember(label));
  outsider = await newMember('mallory');
});
afterAll(async () => {
  await svc?.close();
});

describe('group key agreement, encryption, a new epoch', () => {
  let groupId: string;
  let keys: Buffer[];
  let epoch1Message: any;

  it('creates a group of three: each member unwraps the same epoch key with its own private key', async () => {
    const [alice, bob, carol] = members as [Member, Member, Member];
    const res = await secret(alice, { action: 'create', name: 'trio', members: members.map(memberEntry) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true,
      protocol: 'zh-slim/v1',
      epoch: 1,
      current_epoch: 1,
      owner: alice.id,
      name: 'trio'
    });
    groupId = res.body.group_id;
    expect(res.body.wraps).toHaveLength(3);
    keys = members.map((m) => unwrap(res.body, m));
    expect(keys[1]!.equals(keys[0]!)).toBe(true);
    expect(keys[2]!.equals(keys[0]!)).toBe(true);
    // A member reads the epoch with its own token; an outsider sees nothing.
    const asBob = await secret(bob, { action: 'get', group_id: groupId });
    expect(asBob.status).toBe(200);
    expect(unwrap(asBob.body, carol).equals(keys[0]!)).toBe(true);
    expect((await secret(outsider, { action: 'get', group_id: groupId })).status).toBe(404);
    // The hub stored no secret: the epoch document holds public keys, wraps and the commitment only.
    const stored = await svc.db.collection('slim_group_epochs').findOne({ group_id: groupId });
    expect(JSON.stringify(stored)).not.toContain(keys[0]!.toString('base64url'));
  });

  it('refuses private keys, a low-order X25519 point, unregistered members, duplicates and a changer who is not the owner', async () => {
    const [alice, bob] = members as [Member, Member];
    const withD = { ...memberEntry(alice), x25519: alice.x.privateKey.export({ format: 'jwk' }) };
    expect((await secret(alice, { action: 'create', members: [withD] })).status).toBe(400);
    const lowOrder = {
      ...memberEntry(alice),
      x25519: { kty: 'OKP', crv: 'X25519', x: Buffer.alloc(32).toString('base64url') }
    };
    const weak = await secret(alice, { action: 'create', members: [lowOrder] });
    expect(weak.status).toBe(400);
    expect(weak.body.fields[0].message).toContain('not a usable X25519 public key');
    const stranger = { ...memberEntry(alice), member_id: 'client_0000000000000000' };
    const unknown = await secret(alice, { action: 'create', members: [stranger] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.fields[0].message).toContain('not a registered OAuth client');
    expect((await secret(alice, { action: 'create', members: [memberEntry(alice), memberEntry(alice)] })).status).toBe(
      400
    );
    expect((await secret(bob, { action: 'rekey', group_id: groupId, members: [memberEntry(bob)] })).status).toBe(403);
    expect(
      (await http('POST', url('/v1/slim/group/secret'), { body: { action: 'get', group_id: groupId } })).status
    ).toBe(401);
  });

  it('encrypts and decrypts (hub and locally, both ways); a tampered message is refused', async () => {
    const enc = await http('POST', url('/v1/slim/message/encrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { plaintext: '你好, group' }
    });
    expect(enc.status).toBe(200);
    expect(enc.body.message).toMatchObject({ v: 1, group_id: groupId, epoch: 1 });
    epoch1Message = enc.body.message;
    expect(openLocally(keys[2]!, enc.body.message)).toBe('你好, group');
    const dec = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[1]!),
      body: { message: enc.body.message }
    });
    expect(dec.status).toBe(200);
    expect(dec.body).toMatchObject({ ok: true, group_id: groupId, epoch: 1, plaintext: '你好, group' });
    const local = sealLocally(keys[2]!, groupId, 1, 'sealed by carol');
    const fromCarol = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { message: local }
    });
    expect(fromCarol.body.plaintext).toBe('sealed by carol');
    // The longest plaintext (64 KiB as UTF-8) comes back through decrypt.
    const longest = '中'.repeat(21_845);
    const big = await http('POST', url('/v1/slim/message/encrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { plaintext: longest }
    });
    expect(big.status).toBe(200);
    const bigBack = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[1]!),
      body: { message: big.body.message }
    });
    expect(bigBack.body.plaintext).toBe(longest);
    expect(
      (
        await http('POST', url('/v1/slim/message/encrypt'), {
          headers: asGroup(groupId, keys[0]!),
          body: { plaintext: longest + 'x' }
        })
      ).status
    ).toBe(400);
    // Two encryptions of the same text never share salt, nonce or ciphertext.
    const again = await http('POST', url('/v1/slim/message/encrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { plaintext: '你好, group' }
    });
    expect(again.body.message.iv).not.toBe(enc.body.message.iv);
    expect(again.body.message.ciphertext).not.toBe(enc.body.message.ciphertext);

    const ct = Buffer.from(enc.body.message.ciphertext, 'base64url');
    ct[0]! ^= 1;
    const flipped = { ...enc.body.message, ciphertext: ct.toString('base64url') };
    const tampered = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { message: flipped }
    });
    expect(tampered.status).toBe(400);
    expect(tampered.body.message).toContain('Decryption failed');
    const aad = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { message: enc.body.message, associated_data: 'x' }
    });
    expect(aad.status).toBe(400);
    const otherGroup = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, keys[0]!),
      body: { message: { ...enc.body.message, group_id: 'sg_0000000000000000' } }
    });
    expect(otherGroup.status).toBe(403);
    // Without the key, or with a wrong one: 401.
    expect((await http('POST', url('/v1/slim/message/encrypt'), { body: { plaintext: 'x' } })).status).toBe(401);
    expect(
      (
        await http('POST', url('/v1/slim/message/encrypt'), {
          headers: asGroup(groupId, randomBytes(32)),
          body: { plaintext: 'x' }
        })
      ).status
    ).toBe(401);
  });

  it("starts epoch 2 when carol leaves: a new key for alice and bob only, carol's old key refused", async () => {
    const [alice, bob, carol] = members as [Member, Member, Member];
    const res = await secret(alice, {
      action: 'rekey',
      group_id: groupId,
      members: [memberEntry(alice), memberEntry(bob)],
      reason: 'carol left'
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ epoch: 2, current_epoch: 2, reason: 'carol left' });
    expect(res.body.wraps.map((w: any) => w.member_id)).toEqual([alice.id, bob.id]);
    const k2 = unwrap(res.body, alice);
    expect(unwrap(res.body, bob).equals(k2)).toBe(true);
    expect(k2.equals(keys[0]!)).toBe(false);
    expect(
      (
        await http('POST', url('/v1/slim/message/encrypt'), {
          headers: asGroup(groupId, keys[2]!),
          body: { plaintext: 'still here?' }
        })
      ).status
    ).toBe(401);
    expect((await secret(carol, { action: 'get', group_id: groupId })).status).toBe(404);
    expect((await secret(carol, { action: 'get', group_id: groupId, epoch: 1 })).status).toBe(404);
    const enc = await http('POST', url('/v1/slim/message/encrypt'), {
      headers: asGroup(groupId, k2),
      body: { plaintext: 'epoch two' }
    });
    expect(enc.body.message.epoch).toBe(2);
    expect(() => openLocally(keys[2]!, enc.body.message)).toThrow();
    // An epoch-1 message: decrypted with epoch 2's credential plus epoch 1's key; without it, 400.
    const old = await http('POST', url('/v1/slim/message/decrypt'), {
      headers: asGroup(groupId, k2),
      body: { message: epoch1Message, epoch_key: keys[0]!.toString('base64url') }
    });
    expect(old.body.plaintext).toBe('你好, group');
    expect(
      (
        await http('POST', url('/v1/slim/message/decrypt'), {
          headers: asGroup(groupId, k2),
          body: { message: epoch1Message }
        })
      ).status
    ).toBe(400);
    keys = [k2, k2];
  });
});

describe('concurrent membership changes', () => {
  it('never make the same epoch twice: each change gets its own epoch or 409', async () => {
    const [alice, bob] = members as [Member, Member];
    const created = await secret(alice, { action: 'create', members: [memberEntry(alice)] });
    const groupId = created.body.group_id;
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        secret(alice, { action: 'rekey', group_id: groupId, members: [memberEntry(alice), memberEntry(bob)] })
      )
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true);
    const epochs = answers.filter((a) => a.status === 200).map((a) => a.body.epoch);
    expect(new Set(epochs).size).toBe(epochs.length);
    const now = await secret(bob, { action: 'get', group_id: groupId });
    expect(now.body.current_epoch).toBe(1 + epochs.length);
    // Every epoch a change reported is the one stored, wrapped to the members it named.
    for (const a of answers.filter((x) => x.status === 200)) {
      const stored = await secret(bob, { action: 'get', group_id: groupId, epoch: a.body.epoch });
      expect(stored.body.commitment).toBe(a.body.commitment);
    }
  });
});

describe('group consensus (workflow group-consensus/<id>)', () => {
  let groupId: string;
  let key: Buffer;
  const consensus = (body: unknown) =>
    http('POST', url('/v1/slim/group/consensus'), { headers: asGroup(groupId, key), body });

  beforeAll(async () => {
    const res = await secret(members[0]!, { action: 'create', name: 'council', members: members.map(memberEntry) });
    groupId = res.body.group_id;
    key = unwrap(res.body, members[0]!);
  });

  it('reaches quorum with signed ballots, refuses a forged ballot, and records outcome and ballots in the ledger', async () => {
    const [alice, bob, carol] = members as [Member, Member, Member];
    const opened = await consensus({ action: 'propose', proposal: 'Adopt model v2', quorum: 2, deadline_s: 600 });
    expect(opened.status).toBe(200);
    const id = opened.body.consensus.consensus_id;
    expect(opened.body).toMatchObject({
      workflow_id: `group-consensus/${id}`,
      consensus: { state: 'open', quorum: 2, members: 3, epoch: 1 }
    });
    const forged = await consensus(ballot(bob, groupId, 1, id, 'approve', alice));
    expect(forged.status).toBe(403);
    expect(forged.body.message).toContain('does not verify');
    const first = await consensus(ballot(alice, groupId, 1, id, 'approve'));
    expect(first.status).toBe(200);
    expect(first.body.consensus).toMatchObject({ state: 'open', approvals: 1 });
    expect((await consensus(ballot(alice, groupId, 1, id, 'approve'))).status).toBe(409);
    expect((await consensus({ ...ballot(outsider, groupId, 1, id, 'approve') })).status).toBe(403);
    const second = await consensus(ballot(bob, groupId, 1, id, 'approve'));
    expect(second.status).toBe(200);
    expect(second.body.consensus.approvals).toBe(2);
    const closed = await eventually(
      async () => {
        const s = await consensus({ action: 'status', consensus_id: id });
        return s.body.consensus.state === 'accepted' && s.body.consensus.outcome_seq !== null
          ? s.body.consensus
          : undefined;
      },
      30_000,
      'the accepted outcome'
    );
    expect(closed.ballots.map((b: any) => b.member_id)).toEqual([alice.id, bob.id]);
    expect((await consensus(ballot(carol, groupId, 1, id, 'reject'))).status).toBe(409);
    const record = await svc.db.collection('ledger').findOne({ key: 'hub.slim.consensus.accepted' });
    const value = JSON.parse(record!.value_json as string);
    expect(value).toMatchObject({
      consensus_id: id,
      group_id: groupId,
      epoch: 1,
      quorum: 2,
      outcome: 'accepted',
      approvals: 2
    });
    expect(value.ballots.map((b: any) => b.signature)).toEqual(closed.ballots.map((b: any) => b.signature));
    expect(record!.seq).toBe(closed.outcome_seq);
  });

  it('expires at the deadline when quorum is missed, and records that too', async () => {
    const [alice] = members as [Member];
    const opened = await consensus({ action: 'propose', proposal: 'Spend the budget', quorum: 3, deadline_s: 2 });
    const id = opened.body.consensus.consensus_id;
    expect((await consensus(ballot(alice, groupId, 1, id, 'approve'))).status).toBe(200);
    const closed = await eventually(
      async () => {
        const s = await consensus({ action: 'status', consensus_id: id });
        return s.body.consensus.state === 'expired' && s.body.consensus.outcome_seq !== null
          ? s.body.consensus
          : undefined;
      },
      60_000,
      'the expired outcome'
    );
    expect(closed).toMatchObject({ approvals: 1, quorum: 3 });
    const record = await svc.db.collection('ledger').findOne({ key: 'hub.slim.consensus.expired' });
    expect(JSON.parse(record!.value_json as string)).toMatchObject({ consensus_id: id, outcome: 'expired' });
  });

  it("refuses a quorum above the member count (409), and another group's consensus is not found", async () => {
    expect((await consensus({ action: 'propose', proposal: 'x', quorum: 4, deadline_s: 60 })).status).toBe(409);
    expect((await consensus({ action: 'status', consensus_id: 'gc_0000000000000000' })).status).toBe(404);
  });

  it('lists the routes in the directory under federated_compute with their auth models; the group counts nine', async () => {
    const res = await http('GET', url('/a2a/endpoints'));
    const entries = res.body.endpoints as { path: string; group: string; auth: string }[];
    expect(entries.find((e) => e.path === '/v1/slim/group/secret')).toMatchObject({
      group: 'federated_compute',
      auth: 'oauth'
    });
    expect(entries.find((e) => e.path === '/v1/slim/group/consensus')).toMatchObject({
      group: 'federated_compute',
      auth: 'group_key'
    });
    expect(entries.find((e) => e.path === '/v1/slim/message/encrypt')).toMatchObject({
      group: 'federated_compute',
      auth: 'group_key'
    });
    expect(entries.find((e) => e.path === '/v1/slim/message/decrypt')).toBeUndefined();
    // With these three, the federated_compute group is complete (docs/endpoints.md: nine), and group_key protects
    // real routes.
    const summary = await http('GET', url('/a2a/endpoints/summary'));
    expect(summary.body.endpoint_groups.federated_compute.count).toBe(9);
    expect(res.body.auth_models.find((m: { name: string }) => m.name === 'group_key').endpoints).toBe(2);
  });
});
