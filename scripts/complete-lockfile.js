#!/usr/bin/env node
/**
 * Adds lock entries for optional platform packages the registry used here does not serve (other OSes' builds of
 * @swc/core, esbuild, …), so `npm ci` sees a lock in sync with package.json. npm skips such an optional package
 * on install when it cannot be fetched or does not match the platform. Run after `npm install` changes the lock.
 */
const fs = require('node:fs');
const lockPath = require('node:path').join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(lockPath, 'utf8'));
let added = 0;
for (const [where, pkg] of Object.entries(lock.packages)) {
  for (const [name, spec] of Object.entries(pkg.optionalDependencies ?? {})) {
    const nested = `${where ? `${where}/` : ''}node_modules/${name}`;
    const hoisted = `node_modules/${name}`;
    if (lock.packages[nested] || lock.packages[hoisted]) continue;
    lock.packages[hoisted] = { version: String(spec).replace(/^[\^~=]/, ''), optional: true };
    added += 1;
  }
}
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: added ${added} optional platform entries`);
