/**
 * OAuth 2.0 to the RFCs and DPoP (RFC 9449), over real HTTP, driven by the standard clients unmodified:
 * openid-client (discovery, client credentials, introspection, revocation, DPoP), dpop (proofs), jose (JWKS).
 */
import { generateKeyPair as dpopKeyPair, generateProof } from 'dpop';
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  SignJWT
} from 'jose';
import * as oidc from 'openid-client';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
let clientId: string;
let clientSecret: string;
const admin = () => ({ authorization: `Bearer ${svc.adminToken}` });

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
  const client = await http('POST', `${svc.urls.main}/admin/oauth-clients`, {
    headers: admin(),
    body: { label: 'rfc', scopes: ['compute', 'truth:read'] }
  });
  expect(client.status).toBe(201);
  ({ client_id: clientId, client_secret: clientSecret } = client.body);
});
afterAll(async () => {
  await svc?.close();
});

const discover = () =>
  oidc.discovery(new URL(svc.env.PUBLIC_URL!), clientId, clientSecret, undefined, {
    execute: [oidc.allowInsecureRequests]
  });

describe('openid-client against the hub', () => {
  it('discovers, gets a client-credentials token, introspects it active, revokes it, introspects it inactive', async () => {
    const config = await discover();
    const meta = config.serverMetadata();
    expect(meta.issuer).toBe(svc.env.PUBLIC_URL);
    expect(meta.dpop_signing_alg_values_supported).toEqual(expect.arrayContaining(['EdDSA', 'ES256']));
    expect(meta).not.toHaveProperty('id_token_signing_alg_values_supported');
    const token = await oidc.clientCredentialsGrant(config, { scope: 'compute' });
    expect(token.token_type).toBe('bearer');
    const active = await oidc.tokenIntrospection(config, token.access_token);
    expect(active).toMatchObject({ active: true, client_id: clientId, scope: 'compute', token_type: 'Bearer' });
    await oidc.tokenRevocation(config, token.access_token);
    expect((await oidc.tokenIntrospection(config, token.access_token)).active).toBe(false);
  });

  it('serves the same document as RFC 8414 authorization server metadata', async () => {
    const a = await http('GET', `${svc.urls.main}/.well-known/oauth-authorization-server`);
    const b = await http('GET', `${svc.urls.main}/.well-known/openid-configuration`);
    expect(a.status).toBe(200);
    expect(a.body).toEqual(b.body);
    expect(a.body.response_types_supported).toEqual([]);
  });

  it('gets a DPoP-bound token: token_type DPoP, cnf.jkt of the key, the server nonce handled by the client', async () => {
    const config = await discover();
    const keyPair = await oidc.randomDPoPKeyPair('ES256');
    const token = await oidc.clientCredentialsGrant(
      config,
      { scope: 'compute' },
      { DPoP: oidc.getDPoPHandle(config, keyPair) }
    );
    expect(token.token_type).toBe('dpop');
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
    const info = await oidc.tokenIntrospection(config, token.access_token);
    expect(info).toMatchObject({ active: true, token_type: 'DPoP', cnf: { jkt } });
  });
});

describe('RFC 6749 §5.2 errors at the token endpoint', () => {
  it('answers { error, error_description } only, 401 with WWW-Authenticate: Basic for a failed client authentication', async () => {
    const wrong = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      body: { grant_type: 'client_credentials', client_id: clientId, client_secret: 'cs_wrong' }
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect(Object.keys(wrong.body).sort()).toEqual(['error', 'error_description']);
    expect(wrong.body.error).toBe('invalid_client');
    const creds = { client_id: clientId, client_secret: clientSecret };
    const grant = await http('POST', `${svc.urls.main}/v1/oauth/token`, { body: { grant_type: 'password', ...creds } });
    expect(grant.status).toBe(400);
    expect(Object.keys(grant.body).sort()).toEqual(['error', 'error_description']);
    expect(grant.body.error).toBe('unsupported_grant_type');
    const scope = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      body: { grant_type: 'client_credentials', scope: 'admin', ...creds }
    });
    expect(scope.body.error).toBe('invalid_scope');
    const missing = await http('POST', `${svc.urls.main}/v1/oauth/token`, { body: { ...creds } });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    const repeated = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      raw: `grant_type=client_credentials&grant_type=client_credentials&client_id=${clientId}&client_secret=${clientSecret}`
    });
    expect(repeated.status).toBe(400);
    expect(repeated.body.error).toBe('invalid_request');
    // Statuses outside RFC 6749 §5.2 keep the service's error shape.
    const media = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      headers: {
        authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
        'content-type': 'application/xml'
      },
      raw: '<x/>'
    });
    expect(media.status).toBe(415);
    expect(media.body).toMatchObject({ ok: false, error: 'unsupported_media_type' });
  });

  it('refuses a bad DPoP proof with invalid_dpop_proof, and a proof without nonce with use_dpop_nonce and a DPoP-Nonce', async () => {
    const keyPair = await dpopKeyPair('ES256');
    const basic = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
    const url = `${svc.env.PUBLIC_URL}/v1/oauth/token`;
    const ask = (proof: string) =>
      http('POST', `${svc.urls.main}/v1/oauth/token`, {
        headers: { authorization: basic, dpop: proof, 'content-type': 'application/x-www-form-urlencoded' },
        raw: 'grant_type=client_credentials'
      });
    const noNonce = await ask(await generateProof(keyPair, url, 'POST'));
    expect(noNonce.status).toBe(400);
    expect(noNonce.body.error).toBe('use_dpop_nonce');
    const nonce = noNonce.headers.get('dpop-nonce')!;
    expect(nonce).toBeTruthy();
    const wrongUrl = await ask(await generateProof(keyPair, `${svc.env.PUBLIC_URL}/elsewhere`, 'POST', nonce));
    expect(wrongUrl.body).toMatchObject({ error: 'invalid_dpop_proof' });
    const good = await ask(await generateProof(keyPair, url, 'POST', nonce));
    expect(good.status).toBe(200);
    expect(good.body.token_type).toBe('DPoP');
  });
});

describe('keys', () => {
  it('signs with the OAuth key (not the ledger key), names its kid, and keeps an old key in the JWKS across a rotation', async () => {
    const config = await discover();
    const jwksUrl = new URL(config.serverMetadata().jwks_uri!);
    const jwks = createRemoteJWKSet(jwksUrl, { cooldownDuration: 0 });
    const before = await oidc.clientCredentialsGrant(config, {});
    const oldKid = decodeProtectedHeader(before.access_token).kid;
    expect(oldKid).toBeTruthy();
    await jwtVerify(before.access_token, jwks, { issuer: svc.env.PUBLIC_URL! });
    const card = await http('GET', `${svc.urls.main}/.well-known/agent-card.json`);
    expect(JSON.stringify(card.body)).not.toContain(oldKid!);

    const rotated = await http('POST', `${svc.urls.main}/admin/oauth-keys/rotate`, { headers: admin() });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ ok: true, retired: oldKid });
    const after = await oidc.clientCredentialsGrant(config, {});
    const newKid = decodeProtectedHeader(after.access_token).kid;
    expect(newKid).toBe(rotated.body.kid);
    expect(newKid).not.toBe(oldKid);
    // Both verify from the published JWKS: the old key stays until the last token it signed expires.
    await jwtVerify(after.access_token, jwks, { issuer: svc.env.PUBLIC_URL! });
    await jwtVerify(before.access_token, jwks, { issuer: svc.env.PUBLIC_URL! });
    const keys = (await http('GET', jwksUrl.href)).body.keys.map((k: { kid: string }) => k.kid);
    expect(keys).toEqual([newKid, oldKid]);
    expect((await oidc.tokenIntrospection(config, before.access_token)).active).toBe(true);
  });

  it('shares rotation and revocation with a second API process', async () => {
    const second = await svc.startSecondApi();
    try {
      const config = await discover();
      const token = await oidc.clientCredentialsGrant(config, {});
      const basic = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
      const introspectAt = (base: string, t: string) =>
        http('POST', `${base}/v1/oauth/introspect`, { headers: { authorization: basic }, body: { token: t } });
      expect((await introspectAt(second.url, token.access_token)).body.active).toBe(true);
      await oidc.tokenRevocation(config, token.access_token);
      expect((await introspectAt(second.url, token.access_token)).body.active).toBe(false);

      const rotated = await http('POST', `${second.url}/admin/oauth-keys/rotate`, { headers: admin() });
      const jwks = await http('GET', `${svc.urls.main}/.well-known/jwks.json`);
      expect(jwks.body.keys[0].kid).toBe(rotated.body.kid);
    } finally {
      await second.stop();
    }
  });
});

describe('POST /v1/dpop/verify (RFC 9449 §4.3, proofs from the dpop package)', () => {
  const htu = 'https://compute.example/v1/slim/group/secret';
  const verify = (body: Record<string, unknown>) => http('POST', `${svc.urls.main}/v1/dpop/verify`, { body });
  let nonce: string;

  beforeAll(async () => {
    nonce = (await verify({ proof: 'x.y.z', htm: 'POST', htu })).headers.get('dpop-nonce')!;
  });

  it('demands a server nonce, then accepts the proof, naming the key thumbprint; a replayed jti is refused', async () => {
    const keyPair = await dpopKeyPair('ES256');
    const noNonce = await verify({ proof: await generateProof(keyPair, htu, 'POST'), htm: 'POST', htu });
    expect(noNonce.body).toMatchObject({ valid: false, check: 'nonce', error: 'use_dpop_nonce' });
    const fresh = noNonce.headers.get('dpop-nonce')!;
    const proof = await generateProof(keyPair, htu, 'POST', fresh);
    const ok = await verify({ proof, htm: 'POST', htu: `${htu}?q=1#f` });
    expect(ok.body).toMatchObject({
      valid: true,
      jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey))
    });
    expect((await verify({ proof, htm: 'POST', htu })).body).toMatchObject({ valid: false, check: 'jti' });
  });

  it('names the failing check: htu, htm, ath', async () => {
    const keyPair = await dpopKeyPair('ES256');
    expect(
      (
        await verify({
          proof: await generateProof(keyPair, 'https://other.example/x', 'POST', nonce),
          htm: 'POST',
          htu
        })
      ).body
    ).toMatchObject({ valid: false, check: 'htu' });
    expect(
      (await verify({ proof: await generateProof(keyPair, htu, 'GET', nonce), htm: 'POST', htu })).body
    ).toMatchObject({ valid: false, check: 'htm' });
    const withAth = await generateProof(keyPair, htu, 'POST', nonce, 'the-token');
    expect((await verify({ proof: withAth, htm: 'POST', htu, access_token: 'another-token' })).body).toMatchObject({
      valid: false,
      check: 'ath'
    });
    const rightAth = await generateProof(keyPair, htu, 'POST', nonce, 'the-token');
    expect((await verify({ proof: rightAth, htm: 'POST', htu, access_token: 'the-token' })).body).toMatchObject({
      valid: true
    });
  });

  it('refuses a stale iat, a private key in the jwk and alg none', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = await exportJWK(publicKey);
    const claims = (iat: number) => ({ jti: `jti-${Math.random()}`, htm: 'POST', htu, iat, nonce });
    const stale = await new SignJWT(claims(Math.floor(Date.now() / 1000) - 3600))
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
      .sign(privateKey);
    expect((await verify({ proof: stale, htm: 'POST', htu })).body).toMatchObject({ valid: false, check: 'iat' });
    const leaked = await new SignJWT(claims(Math.floor(Date.now() / 1000)))
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(privateKey) })
      .sign(privateKey);
    expect((await verify({ proof: leaked, htm: 'POST', htu })).body).toMatchObject({ valid: false, check: 'jwk' });
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const none = `${b64({ alg: 'none', typ: 'dpop+jwt', jwk })}.${b64(claims(Math.floor(Date.now() / 1000)))}.`;
    expect((await verify({ proof: none, htm: 'POST', htu })).body).toMatchObject({ valid: false, check: 'jwt' });
    const noneSigned = `${b64({ alg: 'none', typ: 'dpop+jwt', jwk })}.${b64(claims(Math.floor(Date.now() / 1000)))}.AAAA`;
    expect((await verify({ proof: noneSigned, htm: 'POST', htu })).body).toMatchObject({ valid: false, check: 'alg' });
  });
});

describe('GET /v1/slim/handshake', () => {
  it("gives the hub's DID, Ed25519 and X25519 public keys, suites, version, and a fresh nonce that DPoP accepts", async () => {
    const a = await http('GET', `${svc.urls.main}/v1/slim/handshake`);
    const b = await http('GET', `${svc.urls.main}/v1/slim/handshake`);
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({
      ok: true,
      protocol_version: 1,
      did: 'did:zhongshu:hub',
      signing_key: { kty: 'OKP', crv: 'Ed25519' },
      key_agreement_key: { kty: 'OKP', crv: 'X25519' }
    });
    expect(a.body.signing_key).not.toHaveProperty('d');
    expect(a.body.key_agreement_key).not.toHaveProperty('d');
    expect(a.body.nonce).not.toBe(b.body.nonce);
    const htu = 'https://compute.example/v1/x';
    const proof = await generateProof(await dpopKeyPair('ES256'), htu, 'POST', a.body.nonce);
    expect(
      (await http('POST', `${svc.urls.main}/v1/dpop/verify`, { body: { proof, htm: 'POST', htu } })).body
    ).toMatchObject({ valid: true });
  });
});
