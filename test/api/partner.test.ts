/**
 * Partner channels over real HTTP: an administrator registers a partner with its Ed25519 public key; the partner
 * signs requests with HTTP Message Signatures (RFC 9421) and Content-Digest (RFC 9530), written here from the RFCs
 * with node:crypto only (docs/partner.md's worked example does the same steps); the hub's signed answers are
 * verified
 * with the handshake's signing key. Valid, bad signature, stale, replayed (also on a second API process), tampered
 * body, unknown and revoked partner; a standard RFC 9421 library (http-message-signatures, unmodified) signing
 * requests and verifying the hub's answers; the secure channel's envelope (X25519 + HKDF-SHA-256 + AES-256-GCM to the
 * handshake's key-agreement key) round trip, and a tampered ciphertext refused.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  KeyObject,
  randomBytes,
  sign,
  verify
} from 'node:crypto';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { createSigner, createVerifier, httpbis } from 'http-message-signatures';
import { http, startTestService, TestService } from '../support/service';

jest.setTimeout(120_000);

let svc: TestService;
const admin = () => ({ authorization: `Bearer ${svc.adminToken}` });

interface Partner {
  id: string;
  privateKey: KeyObject;
  publicRaw: string;
}
function newPartner(id: string): Partner {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { id, privateKey, publicRaw: (publicKey.export({ format: 'jwk' }) as { x: string }).x };
}

const sha256b64 = (data: Buffer | string) => createHash('sha256').update(data).digest('base64');

/** Signs a POST as RFC 9421 §2.5 describes: the signature base, then Ed25519 over it. */
function signRequest(
  partner: Partner,
  path: string,
  body: string,
  options: { created?: number; keyid?: string; signWith?: KeyObject } = {}
) {
  const digest = `sha-256=:${sha256b64(body)}:`;
  const created = options.created ?? Math.floor(Date.now() / 1000);
  const params = `("@method" "@path" "content-digest");created=${created};keyid="${options.keyid ?? partner.id}";alg="ed25519"`;
  const base = [
    `"@method": POST`,
    `"@path": ${path}`,
    `"content-digest": ${digest}`,
    `"@signature-params": ${params}`
  ].join('\n');
  const signature = sign(null, Buffer.from(base), options.signWith ?? partner.privateKey).toString('base64');
  return {
    'content-type': 'application/json',
    'content-digest': digest,
    'signature-input': `sig1=${params}`,
    signature: `sig1=:${signature}:`
  };
}

async function send(url: string, headers: Record<string, string>, body: string) {
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : null };
}

let hubSigningKey: KeyObject;
let hubAgreementRaw: string;

/** Verifies the hub's signature on an answer (mutual authentication) and its binding to our request. */
function expectSignedByHub(res: { status: number; headers: Headers; text: string }, requestSignatureHeader?: string) {
  const digest = res.headers.get('content-digest')!;
  expect(digest).toBe(`sha-256=:${sha256b64(res.text)}:`);
  const input = res.headers.get('signature-input')!;
  const params = input.replace(/^hub=/, '');
  expect(params.startsWith('("@status" "content-digest")')).toBe(true);
  const base = [`"@status": ${res.status}`, `"content-digest": ${digest}`, `"@signature-params": ${params}`].join('\n');
  const sig = Buffer.from(/^hub=:(.*):$/.exec(res.headers.get('signature')!)![1]!, 'base64');
  expect(verify(null, Buffer.from(base), hubSigningKey, sig)).toBe(true);
  if (requestSignatureHeader) {
    const requestSig = Buffer.from(/^sig1=:(.*):$/.exec(requestSignatureHeader)![1]!, 'base64');
    expect(params).toContain(`;nonce="${createHash('sha256').update(requestSig).digest('base64url')}"`);
  }
}

const alice = newPartner('alice-federation');
const mallory = newPartner('mallory');
const kunlun = () => `${svc.urls.main}/v1/federated/kunlun`;
const secure = () => `${svc.urls.main}/v1/kunlun/secure`;

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
  const handshake = await http('GET', `${svc.urls.main}/v1/slim/handshake`);
  hubSigningKey = createPublicKey({ key: handshake.body.signing_key, format: 'jwk' });
  hubAgreementRaw = handshake.body.key_agreement_key.x;
});
afterAll(async () => {
  await svc?.close();
});

it('lists both partner channels in the directory under kunlun_federation, auth partner_federation, not public read', async () => {
  const entries = (await http('GET', `${svc.urls.main}/a2a/endpoints`)).body.endpoints as {
    path: string;
    group: string;
    auth: string;
  }[];
  const channels = entries.filter((e) => e.group === 'kunlun_federation');
  expect(channels.map((e) => e.path).sort()).toEqual(['/v1/federated/kunlun', '/v1/kunlun/secure']);
  expect(channels.every((e) => e.auth === 'partner_federation')).toBe(true);
  const summary = (await http('GET', `${svc.urls.main}/a2a/endpoints/summary`)).body;
  expect(summary.endpoint_groups.kunlun_federation).toMatchObject({ count: 2, public_read: false });

  // The OpenAPI document names the signature headers as the channels' security, and their refusals.
  const doc = (await http('GET', `${svc.urls.main}/openapi.json`)).body;
  expect(Object.keys(doc.components.securitySchemes)).toEqual(
    expect.arrayContaining(['partner_signature_input', 'partner_signature'])
  );
  for (const p of ['/v1/federated/kunlun', '/v1/kunlun/secure']) {
    expect(doc.paths[p].post.security).toEqual([{ partner_signature_input: [], partner_signature: [] }]);
    expect(Object.keys(doc.paths[p].post.responses)).toEqual(expect.arrayContaining(['200', '400', '401']));
  }
});

describe('partner registration (admin)', () => {
  it('registers with a raw key (201), again with the same key (200), refuses another key (409) and non-admins (401)', async () => {
    const first = await http('POST', `${svc.urls.main}/admin/partners`, {
      headers: admin(),
      body: { partner_id: alice.id, name: 'Alice Federation', public_key: alice.publicRaw }
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      ok: true,
      created: true,
      partner: { partner_id: alice.id, public_key: alice.publicRaw, revoked_at: null }
    });
    const again = await http('POST', `${svc.urls.main}/admin/partners`, {
      headers: admin(),
      body: {
        partner_id: alice.id,
        name: 'Alice Federation',
        public_key: { kty: 'OKP', crv: 'Ed25519', x: alice.publicRaw }
      }
    });
    expect(again.status).toBe(200);
    const other = await http('POST', `${svc.urls.main}/admin/partners`, {
      headers: admin(),
      body: { partner_id: alice.id, name: 'x', public_key: mallory.publicRaw }
    });
    expect(other.status).toBe(409);
    expect(
      (
        await http('POST', `${svc.urls.main}/admin/partners`, {
          body: { partner_id: 'zed', name: 'x', public_key: mallory.publicRaw }
        })
      ).status
    ).toBe(401);
    expect(
      (
        await http('POST', `${svc.urls.main}/admin/partners`, {
          headers: admin(),
          body: { partner_id: 'zed', name: 'x', public_key: 'not-a-key' }
        })
      ).status
    ).toBe(400);
    const list = await http('GET', `${svc.urls.main}/admin/partners`, { headers: admin() });
    expect(list.body.partners.map((p: { partner_id: string }) => p.partner_id)).toContain(alice.id);
  });

  it('registers and revokes from the admin CLI (npm run admin -- partner / partner-revoke)', async () => {
    const carol = newPartner('carol-federation');
    const cli = (...args: string[]) =>
      JSON.parse(
        execFileSync(process.execPath, ['--import', 'tsx', path.join(__dirname, '../../scripts/admin.ts'), ...args], {
          env: { ...process.env, ...svc.env, ADMIN_URL: svc.urls.main },
          encoding: 'utf8'
        })
      );
    expect(cli('partner', carol.id, carol.publicRaw, 'Carol')).toMatchObject({
      ok: true,
      created: true,
      partner: { partner_id: carol.id, name: 'Carol' }
    });
    expect(cli('partner-revoke', carol.id)).toEqual({ ok: true, partner_id: carol.id, revoked: true });
  });
});

describe('POST /v1/federated/kunlun', () => {
  it('answers a validly signed request, and signs its answer bound to the request', async () => {
    const body = JSON.stringify({ op: 'hello' });
    const headers = signRequest(alice, '/v1/federated/kunlun', body);
    const res = await send(kunlun(), headers, body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, op: 'hello', partner_id: alice.id, partner_name: 'Alice Federation' });
    expectSignedByHub(res, headers.signature);

    const entries = JSON.stringify({ op: 'ledger_entries', after: 0, limit: 5 });
    const listed = await send(kunlun(), signRequest(alice, '/v1/federated/kunlun', entries), entries);
    expect(listed.status).toBe(200);
    expect(listed.body.entries.length).toBeGreaterThan(0);
    expect(listed.body.entries.some((e: { key: string }) => e.key === 'hub.admin.partner_registered')).toBe(true);
  });

  it('accepts requests signed by a standard RFC 9421 library, whose verifier accepts the hub answers', async () => {
    const body = JSON.stringify({ op: 'echo', message: 'from http-message-signatures' });
    const request = {
      method: 'POST',
      url: kunlun(),
      headers: { 'content-type': 'application/json', 'content-digest': `sha-256=:${sha256b64(body)}:` } as Record<
        string,
        string
      >
    };
    const signed = await httpbis.signMessage(
      {
        key: createSigner(alice.privateKey, 'ed25519', alice.id),
        fields: ['@method', '@authority', '@path', 'content-type', 'content-digest'],
        params: ['keyid', 'alg', 'created', 'expires', 'nonce'],
        paramValues: { nonce: randomBytes(8).toString('hex') }
      },
      request
    );
    const res = await send(kunlun(), signed.headers as Record<string, string>, body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, op: 'echo', message: 'from http-message-signatures' });

    const response = { status: res.status, headers: Object.fromEntries(res.headers.entries()) };
    const keyLookup = async () => ({ id: 'hub', algs: ['ed25519'], verify: createVerifier(hubSigningKey, 'ed25519') });
    await expect(
      httpbis.verifyMessage(
        { keyLookup, requiredFields: ['@status', 'content-digest'], requiredParams: ['created', 'keyid'] },
        response
      )
    ).resolves.toBe(true);
    const forgedStatus = { ...response, status: 201 };
    await expect(httpbis.verifyMessage({ keyLookup }, forgedStatus)).resolves.toBe(false);
  });

  it('refuses a request without a signature, and signs the refusal', async () => {
    const res = await send(kunlun(), { 'content-type': 'application/json' }, JSON.stringify({ op: 'hello' }));
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ ok: false, error: 'unauthorized' });
    expectSignedByHub(res);
  });

  it('refuses a bad signature (another key, or a signature over other content)', async () => {
    const body = JSON.stringify({ op: 'hello' });
    const forged = await send(
      kunlun(),
      signRequest(alice, '/v1/federated/kunlun', body, { signWith: mallory.privateKey }),
      body
    );
    expect(forged.status).toBe(401);
    expect(forged.body.message).toMatch(/bad signature/);

    const wrongPath = await send(kunlun(), signRequest(alice, '/v1/kunlun/secure', body), body);
    expect(wrongPath.status).toBe(401);
    expect(wrongPath.body.message).toMatch(/bad signature/);
  });

  it('refuses a body that is not the signed one (Content-Digest mismatch)', async () => {
    const signedBody = JSON.stringify({ op: 'echo', message: 'pay 10' });
    const headers = signRequest(alice, '/v1/federated/kunlun', signedBody);
    const res = await send(kunlun(), headers, JSON.stringify({ op: 'echo', message: 'pay 99' }));
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/Content-Digest/);
  });

  it('refuses a stale signature', async () => {
    const body = JSON.stringify({ op: 'hello' });
    const res = await send(
      kunlun(),
      signRequest(alice, '/v1/federated/kunlun', body, { created: Math.floor(Date.now() / 1000) - 600 }),
      body
    );
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/stale/);
  });

  it('refuses a replayed request, on this API process and on another', async () => {
    const body = JSON.stringify({ op: 'ledger_head' });
    const headers = signRequest(alice, '/v1/federated/kunlun', body);
    const first = await send(kunlun(), headers, body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: true, op: 'ledger_head' });
    const replay = await send(kunlun(), headers, body);
    expect(replay.status).toBe(401);
    expect(replay.body.message).toMatch(/replayed/);

    // The replay store: one record per accepted signature, expiring when the signature would be stale anyway.
    const record = await svc.db.collection('partner_replays').findOne({ partner_id: alice.id });
    expect(record?.expires_at).toBeInstanceOf(Date);

    const second = await svc.startSecondApi();
    try {
      const elsewhere = await send(`${second.url}/v1/federated/kunlun`, headers, body);
      expect(elsewhere.status).toBe(401);
      expect(elsewhere.body.message).toMatch(/replayed/);
      const fresh = JSON.stringify({ op: 'echo', message: 'hello from the second process' });
      expect(
        (await send(`${second.url}/v1/federated/kunlun`, signRequest(alice, '/v1/federated/kunlun', fresh), fresh))
          .status
      ).toBe(200);
    } finally {
      await second.stop();
    }
  });

  it('refuses an unknown partner and a revoked one', async () => {
    const body = JSON.stringify({ op: 'hello' });
    const unknown = await send(kunlun(), signRequest(mallory, '/v1/federated/kunlun', body), body);
    expect(unknown.status).toBe(401);
    const bob = newPartner('bob-federation');
    expect(
      (
        await http('POST', `${svc.urls.main}/admin/partners`, {
          headers: admin(),
          body: { partner_id: bob.id, name: 'Bob', public_key: bob.publicRaw }
        })
      ).status
    ).toBe(201);
    expect((await send(kunlun(), signRequest(bob, '/v1/federated/kunlun', body), body)).status).toBe(200);
    expect((await http('POST', `${svc.urls.main}/admin/partners/${bob.id}/revoke`, { headers: admin() })).status).toBe(
      200
    );
    const revoked = await send(
      kunlun(),
      signRequest(bob, '/v1/federated/kunlun', body, { created: Math.floor(Date.now() / 1000) - 1 }),
      body
    );
    expect(revoked.status).toBe(401);
    expect(revoked.body.message).toMatch(/revoked/);
  });

  it('refuses an invalid operation with 400 (after authentication)', async () => {
    const body = JSON.stringify({ op: 'drop_tables' });
    const res = await send(kunlun(), signRequest(alice, '/v1/federated/kunlun', body), body);
    expect(res.status).toBe(400);
  });
});

/** The partner's side of the envelope, from docs/partner.md: X25519, HKDF-SHA-256, AES-256-GCM. */
function sealRequest(partnerId: string, operation: unknown) {
  const eph = generateKeyPairSync('x25519');
  const epk = (eph.publicKey.export({ format: 'jwk' }) as { x: string }).x;
  const hubPublic = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: hubAgreementRaw }, format: 'jwk' });
  const shared = diffieHellman({
    privateKey: createPrivateKey(eph.privateKey.export({ format: 'pem', type: 'pkcs8' })),
    publicKey: hubPublic
  });
  const salt = Buffer.concat([Buffer.from(epk, 'base64url'), Buffer.from(hubAgreementRaw, 'base64url')]);
  const requestKey = Buffer.from(hkdfSync('sha256', shared, salt, 'zhongshu-hub kunlun/secure v1 request', 32));
  const responseKey = Buffer.from(hkdfSync('sha256', shared, salt, 'zhongshu-hub kunlun/secure v1 response', 32));
  const aad = Buffer.from(`kunlun/secure/v1|${partnerId}|${epk}`);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', requestKey, iv);
  cipher.setAAD(aad);
  const ct = Buffer.concat([cipher.update(JSON.stringify(operation)), cipher.final(), cipher.getAuthTag()]);
  const envelope = {
    v: 1,
    alg: 'X25519-HKDF-SHA256-A256GCM',
    epk,
    iv: iv.toString('base64url'),
    ciphertext: ct.toString('base64url')
  };
  const openResponse = (answer: { iv: string; ciphertext: string }) => {
    const data = Buffer.from(answer.ciphertext, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', responseKey, Buffer.from(answer.iv, 'base64url'));
    decipher.setAAD(aad);
    decipher.setAuthTag(data.subarray(data.length - 16));
    return JSON.parse(
      Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]).toString('utf8')
    );
  };
  return { envelope, openResponse };
}

describe('POST /v1/kunlun/secure', () => {
  it('opens a signed envelope and answers encrypted under the response key', async () => {
    const { envelope, openResponse } = sealRequest(alice.id, { op: 'echo', message: 'the launch code is 0000' });
    const body = JSON.stringify(envelope);
    const headers = signRequest(alice, '/v1/kunlun/secure', body);
    const res = await send(secure(), headers, body);
    expect(res.status).toBe(200);
    expect(res.text).not.toContain('launch code');
    expect(res.body).toMatchObject({ ok: true, v: 1, alg: 'X25519-HKDF-SHA256-A256GCM' });
    expectSignedByHub(res, headers.signature);
    expect(openResponse(res.body)).toEqual({
      ok: true,
      op: 'echo',
      partner_id: alice.id,
      message: 'the launch code is 0000'
    });

    const head = sealRequest(alice.id, { op: 'ledger_head' });
    const headBody = JSON.stringify(head.envelope);
    const answer = await send(secure(), signRequest(alice, '/v1/kunlun/secure', headBody), headBody);
    expect(answer.status).toBe(200);
    expect(head.openResponse(answer.body)).toMatchObject({
      ok: true,
      op: 'ledger_head',
      size: expect.any(Number),
      root: expect.any(String)
    });
  });

  it('refuses a tampered ciphertext, an envelope sealed for another partner, and an invalid inner operation', async () => {
    const { envelope } = sealRequest(alice.id, { op: 'echo', message: 'hello' });
    const bytes = Buffer.from(envelope.ciphertext, 'base64url');
    bytes[0]! ^= 0x01;
    const tampered = JSON.stringify({ ...envelope, ciphertext: bytes.toString('base64url') });
    const res = await send(secure(), signRequest(alice, '/v1/kunlun/secure', tampered), tampered);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/does not decrypt/);

    // Sealed with another partner id in the associated data: alice cannot pass off bob's envelope as hers.
    const foreign = JSON.stringify(sealRequest('bob-federation', { op: 'hello' }).envelope);
    expect((await send(secure(), signRequest(alice, '/v1/kunlun/secure', foreign), foreign)).status).toBe(400);

    const invalid = JSON.stringify(sealRequest(alice.id, { op: 'nope' }).envelope);
    const bad = await send(secure(), signRequest(alice, '/v1/kunlun/secure', invalid), invalid);
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/decrypted operation/);
  });
});
