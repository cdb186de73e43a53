/** Locates (building on first use) the embedded stack's binaries via scripts/install-tools.sh. */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

export function ensureTool(name: 'temporal' | 'ferretdb'): string {
  const script = path.join(__dirname, '..', 'install-tools.sh');
  const result = spawnSync('bash', [script, name], { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' });
  process.stderr.write(result.stderr ?? '');
  if (result.status !== 0) throw new Error(`could not install ${name}: see the messages above`);
  const match = /-> (\S+)$|cached at (\S+)$/m.exec(result.stderr ?? '');
  const bin = match?.[1] ?? match?.[2];
  if (!bin) throw new Error(`install-tools.sh did not say where ${name} is`);
  return bin;
}
