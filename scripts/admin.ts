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
 *   partner <id> <key> [name]    register a partner: its Ed25519 public key, base64url (the partner channels)
 *   partner-revoke <id>          revoke a partner
 *   api-key-plan <key_id> <plan> change a chat key's plan (S1-S5)
 *   api-key-usage <key_id> [days]  a chat key's usage per day
 *   key-group <key_id> [label]   create a key group under a key of plan S4 or S5
 *   key-groups <key_id>          a key's groups and their keys
 *   key-group-key <group_id> [label] [plan]  issue a key into a group (its own quota)
 *   knowledge                    the trial chat knowledge base: counts and version
 *   knowledge-import <file>      import knowledge cards and documents from a .json or .md file
 */
import fs from 'node:fs';
import { loadConfig } from '../core/config.node';
import { adminTokenPath } from '../api/admin-token';

const header = fs.readFileSync(__filename, 'utf8').split('\n');
const USAGE = header
  .slice(1, header.indexOf(' */'))
  .map((l) => l.replace(/^ \*\s?/, ''))
  .join('\n');

async function main(): Promise<void> {
  const config = loadConfig();
  const [command, ...args] = process.argv.slice(2);
  const token =
    config.ADMIN_TOKEN ??
    (fs.existsSync(adminTokenPath(config.dataDir))
      ? fs.readFileSync(adminTokenPath(config.dataDir), 'utf8').trim()
      : undefined);
  if (!token)
    throw new Error(
      `no administrator token: set ADMIN_TOKEN or start the service once (it writes ${adminTokenPath(config.dataDir)})`
    );
  const base = (process.env.ADMIN_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '');
  const call = async (path: string, body: Record<string, unknown> = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body)
    });
    const text = await res.text();
    process.stdout.write(`${text}\n`);
    if (!res.ok) process.exitCode = 1;
  };
  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
    process.stdout.write(`${await res.text()}\n`);
    if (!res.ok) process.exitCode = 1;
  };
  switch (command) {
    case 'did':
      return call('/admin/dids', { did: args[0], ...(args[1] ? { label: args[1] } : {}) });
    case 'did-revoke':
      return call(`/admin/dids/${encodeURIComponent(args[0] ?? '')}/revoke`);
    case 'homologous':
      return call('/admin/homologous-tokens', {
        ...(args[0] ? { did: args[0] } : {}),
        ...(args[1] ? { label: args[1] } : {})
      });
    case 'api-key':
      return call('/admin/api-keys', { ...(args[0] ? { label: args[0] } : {}), ...(args[1] ? { plan: args[1] } : {}) });
    case 'api-key-revoke':
      return call(`/admin/api-keys/${args[0] ?? ''}/revoke`);
    case 'api-key-regenerate':
      return call(`/admin/api-keys/${args[0] ?? ''}/regenerate`);
    case 'oauth-client':
      return call('/admin/oauth-clients', { scopes: args[0] ? args[0].split(',') : [] });
    case 'partner':
      return call('/admin/partners', { partner_id: args[0], public_key: args[1], name: args[2] ?? args[0] });
    case 'partner-revoke':
      return call(`/admin/partners/${encodeURIComponent(args[0] ?? '')}/revoke`);
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
    case 'api-key-plan':
      return call(`/admin/api-keys/${args[0] ?? ''}/plan`, { plan: args[1] });
    case 'api-key-usage':
      return get(`/admin/api-keys/${args[0] ?? ''}/usage${args[1] ? `?days=${encodeURIComponent(args[1])}` : ''}`);
    case 'key-group':
      return call(`/admin/api-keys/${args[0] ?? ''}/groups`, args[1] ? { label: args[1] } : {});
    case 'key-groups':
      return get(`/admin/api-keys/${args[0] ?? ''}/groups`);
    case 'key-group-key':
      return call(`/admin/key-groups/${encodeURIComponent(args[0] ?? '')}/keys`, {
        ...(args[1] ? { label: args[1] } : {}),
        ...(args[2] ? { plan: args[2] } : {})
      });
    case 'knowledge':
      return get('/admin/knowledge');
    case 'knowledge-import': {
      if (!args[0]) throw new Error('knowledge-import <file.json|file.md>');
      const text = fs.readFileSync(args[0], 'utf8');
      // .md / .markdown: the Markdown format (docs/chat.md#trial-chat-post-trychat-x-did); anything else: JSON
      // { cards, documents }.
      return /\.(md|markdown)$/i.test(args[0])
        ? call('/admin/knowledge/import/markdown', { markdown: text })
        : call('/admin/knowledge/import', JSON.parse(text) as Record<string, unknown>);
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exitCode = 2;
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
