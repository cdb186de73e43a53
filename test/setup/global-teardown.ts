/** Stops the embedded stack started by global-setup.ts and removes its scratch data dir. */
import fs from 'node:fs';
import type { EmbeddedStore } from '../../scripts/stack/ferretdb';
import type { ServerHandle } from '../../scripts/stack/process';

export default async function globalTeardown(): Promise<void> {
  const stack = (globalThis as Record<string, unknown>).__ZH_STACK__ as
    { store: EmbeddedStore; temporal: ServerHandle; dataDir: string } | undefined;
  if (!stack) return;
  await Promise.all([stack.store.stop(), stack.temporal.stop()]);
  fs.rmSync(stack.dataDir, { recursive: true, force: true });
}
