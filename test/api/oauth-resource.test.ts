/**
 * DPoP-bound tokens at protected routes (RFC 9449 §7), over HTTP to an app with the real auth plugin, error
 * handler and OAuth routes over MongoDB: no served route takes access tokens yet, so two probe routes declare the
 * `oauth` and `dpop` models here. Proofs come from the dpop package.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify, { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { generateKeyPair, generateProof } from 'dpop';
import { Db, MongoClient } from 'mongodb';
import { z } from 'zod';
import { loadConfig } from '../../core/config.node';
import { loadOrCreateHubKeys } from '../../store/keys/hub-keys';
import errorsPlugin from '../../api/plugins/errors';
import authPlugin, { AuthDeps } from '../../api/plugins/auth';
import { oauthRoutes } from '../../api/routes/oauth';
import { CredentialStore } from '../../store/credentials';

const BASE = 'http://hub.test';
let client: MongoClient;
let db: Db;
let app: FastifyInstance;
let basic: string;
let url: string;
let dataDir: string;

/** What a client sees: status, JSON body, headers (light-my-request's inject cannot load under jest here). */
async function send(method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
  const isForm = headers['content-type'] === 'application/x-www-form-urlencoded';
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { ...(body !== undefined && !isForm ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: isForm ? String(body) : JSON.stringify(body) } : {})
  });
  const text = await res.text();
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), json: () => JSON.parse(text) };
}

beforeAll(async () => {
  client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!);
  db = client.db(`oauth_resource_${process.pid}_${Date.now()}`);
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'oauth-resource-'));
  const config = loadConfig({ PUBLIC_URL: BASE, DATA_DIR: dataDir });
  const credentials = new CredentialStore(db);
  const keys = loadOrCreateHubKeys(config.dataDir);
  const deps = { config, credentials, keys, adminTokenHash: '', nodeCache: null } as unknown as AuthDeps;
  app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(errorsPlugin);
  await app.register(authPlugin, { deps });
  await app.register(oauthRoutes, { config, keys, credentials });
  const probe = { response: { 200: z.object({ model: z.string(), id: z.string() }) } };
  app.get('/probe/oauth', { config: { auth: 'oauth' }, schema: probe }, async (request) => ({
    model: request.principal!.model,
    id: request.principal!.id
  }));
  app.get('/probe/dpop', { config: { auth: 'dpop' }, schema: probe }, async (request) => ({
    model: request.principal!.model,
    id: request.principal!.id
  }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const { clientSecret, doc } = await credentials.issueOAuthClient('probe', ['compute']);
  basic = `Basic ${Buffer.from(`${doc._id}:${clientSecret}`).toString('base64')}`;
});
afterAll(async () => {
  await app?.close();
  await db?.dropDatabase();
  await client?.close();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

const nonce = async () =>
  (await send('POST', '/v1/dpop/verify', {}, { proof: 'a.b.c', htm: 'GET', htu: BASE })).headers['dpop-nonce']!;

async function tokenFor(keyPair?: Awaited<ReturnType<typeof generateKeyPair>>): Promise<string> {
  const headers: Record<string, string> = { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' };
  if (keyPair) headers.dpop = await generateProof(keyPair, `${url}/v1/oauth/token`, 'POST', await nonce());
  const res = await send('POST', '/v1/oauth/token', headers, 'grant_type=client_credentials');
  expect(res.statusCode).toBe(200);
  return res.json().access_token;
}

it('accepts a bound token only as Authorization: DPoP with a proof by the bound key, for this method and URL', async () => {
  const keyPair = await generateKeyPair('ES256');
  const token = await tokenFor(keyPair);
  const call = async (path: string, authorization: string, proof?: string) =>
    send('GET', path, { authorization, ...(proof ? { dpop: proof } : {}) });

  const asBearer = await call('/probe/oauth', `Bearer ${token}`);
  expect(asBearer.statusCode).toBe(401);
  expect(asBearer.headers['www-authenticate']).toMatch(/^DPoP error="invalid_token"/);

  const good = await call(
    '/probe/oauth',
    `DPoP ${token}`,
    await generateProof(keyPair, `${url}/probe/oauth`, 'GET', await nonce(), token)
  );
  expect(good.json()).toEqual({ model: 'oauth', id: expect.any(String) });
  expect(
    (
      await call(
        '/probe/dpop',
        `DPoP ${token}`,
        await generateProof(keyPair, `${url}/probe/dpop`, 'GET', await nonce(), token)
      )
    ).statusCode
  ).toBe(200);

  const other = await generateKeyPair('ES256');
  const wrongKey = await call(
    '/probe/dpop',
    `DPoP ${token}`,
    await generateProof(other, `${url}/probe/dpop`, 'GET', await nonce(), token)
  );
  expect(wrongKey.statusCode).toBe(401);
  const wrongUrl = await call(
    '/probe/dpop',
    `DPoP ${token}`,
    await generateProof(keyPair, `${url}/probe/oauth`, 'GET', await nonce(), token)
  );
  expect(wrongUrl.statusCode).toBe(401);
  const noAth = await call(
    '/probe/dpop',
    `DPoP ${token}`,
    await generateProof(keyPair, `${url}/probe/dpop`, 'GET', await nonce())
  );
  expect(noAth.statusCode).toBe(401);
  const noNonce = await call(
    '/probe/dpop',
    `DPoP ${token}`,
    await generateProof(keyPair, `${url}/probe/dpop`, 'GET', undefined, token)
  );
  expect(noNonce.statusCode).toBe(401);
  expect(noNonce.headers['www-authenticate']).toMatch(/use_dpop_nonce/);
  expect(noNonce.headers['dpop-nonce']).toBeTruthy();
  const proof = await generateProof(keyPair, `${url}/probe/dpop`, 'GET', await nonce(), token);
  expect((await call('/probe/dpop', `DPoP ${token}`, proof)).statusCode).toBe(200);
  expect((await call('/probe/dpop', `DPoP ${token}`, proof)).statusCode).toBe(401);
});

it('refuses an unbound token at the dpop model, accepts it as Bearer at the oauth model, and a revoked token nowhere', async () => {
  const token = await tokenFor();
  expect((await send('GET', '/probe/oauth', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
  expect((await send('GET', '/probe/dpop', { authorization: `Bearer ${token}` })).statusCode).toBe(401);
  await send('POST', '/v1/oauth/revoke', { authorization: basic }, { token });
  expect((await send('GET', '/probe/oauth', { authorization: `Bearer ${token}` })).statusCode).toBe(401);
});
