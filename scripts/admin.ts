/**
 * `npm run admin -- <command>`: the /admin API from a terminal. The token comes from ADMIN_TOKEN or
 * DATA_DIR/admin-token; the API from ADMIN_URL, PUBLIC_URL or http://localhost:PORT.
 *   did <did> [label]            register a DID (X-DID)
 *   did-revoke <did>             revoke a DID
 *   homologous [did] [label]     issue an X-ZR-Token, or with a DID an X-Capture-Token for it
 *   api-key [label] [plan]       issue a zk_ API key
 *   api-key-revoke <key_id>      revoke it
 *   api-key-regenerate <key_id>  new secret, same key id
 *   oauth-client [scope,...]     issue an OAuth client (client credentials)
 *   daemon-asset [label]         issue the daemon's two factors (asset id + order root)
 *   daemon-asset-revoke <id>     revoke a daemon asset
 *   daemon-release <asset_id>    release an isolated daemon asset
 *   daemon-breaker-reset         close the daemon's circuit breaker
 *   rotate-oauth-key             new OAuth signing key; the old one verifies until its last token expires
 */
import fs from 'node:fs';
import { loadConfig } from '../core/config.node';
import { adminTokenPath } from '../api/admin-token';

const USAGE = fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 16).map((l) => l.replace(/^ \*\s?/, '')).join('\n');

async function main(): Promise<void> {
  const config = loadConfig();
  const [command, ...args] = process.argv.slice(2);
  const token = config.ADMIN_TOKEN ?? (fs.existsSync(adminTokenPath(config.dataDir)) ? fs.readFileSync(adminTokenPath(config.dataDir), 'utf8').trim() : undefined);
  if (!token) throw new Error(`no administrator token: set ADMIN_TOKEN or start the service once (it writes ${adminTokenPath(config.dataDir)})`);
  const base = (process.env.ADMIN_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '');
  const call = async (path: string, body: Record<string, unknown> = {}) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await res.text();
    process.stdout.write(`${text}\n`);
    if (!res.ok) process.exitCode = 1;
  };
  switch (command) {
    case 'did':
      return call('/admin/dids', { did: args[0], ...(args[1] ? { label: args[1] } : {}) });
    case 'did-revoke':
      return call(`/admin/dids/${encodeURIComponent(args[0] ?? '')}/revoke`);
    case 'homologous':
      return call('/admin/homologous-tokens', { ...(args[0] ? { did: args[0] } : {}), ...(args[1] ? { label: args[1] } : {}) });
    case 'api-key':
      return call('/admin/api-keys', { ...(args[0] ? { label: args[0] } : {}), ...(args[1] ? { plan: args[1] } : {}) });
    case 'api-key-revoke':
      return call(`/admin/api-keys/${args[0] ?? ''}/revoke`);
    case 'api-key-regenerate':
      return call(`/admin/api-keys/${args[0] ?? ''}/regenerate`);
    case 'oauth-client':
      return call('/admin/oauth-clients', { scopes: args[0] ? args[0].split(',') : [] });
    case 'rotate-oauth-key':
      return call('/admin/oauth-keys/rotate');
    case 'daemon-asset':
      return call('/admin/daemon-assets', args[0] ? { label: args[0] } : {});
    case 'daemon-asset-revoke':
      return call(`/admin/daemon-assets/${encodeURIComponent(args[0] ?? '')}/revoke`);
    case 'daemon-release':
      return call(`/admin/daemon-assets/${encodeURIComponent(args[0] ?? '')}/release`);
    case 'daemon-breaker-reset':
      return call('/admin/daemon/breaker/reset');
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exitCode = 2;
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
