/**
 * Starts the embedded stack once per jest run, on free loopback ports in a scratch data dir: FerretDB on a
 * PostgreSQL server of its own, as `npm start` runs it, and the Temporal dev server (headless). Bundles the workflow
 * code once. Suites read where things are from env.
 * The ports are left to startEmbeddedStore/startTemporal, so a start that finds one taken is tried again on new ones.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startEmbeddedStore } from '../../scripts/stack/ferretdb';
import { startTemporal } from '../../scripts/stack/temporal';

export default async function globalSetup(): Promise<void> {
  // Run as root, PostgreSQL runs as the `postgres` user, which then also reaches the data dirs suites make in here
  // (startPostgres gives this directory the search bit).
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-test-'));
  const [store, temporal] = await Promise.all([
    startEmbeddedStore({ dataDir, echo: false }),
    startTemporal({ dataDir, namespace: 'default', headless: true, echo: false })
  ]);
  const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quietLogger() });
  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, bundle.code);

  process.env.ZH_TEST_DATA_DIR = dataDir;
  process.env.ZH_TEST_MONGODB_URI = store.uri;
  process.env.ZH_TEST_FERRETDB_PORT = String(store.ferret.port);
  process.env.ZH_TEST_TEMPORAL_ADDRESS = temporal.address;
  process.env.ZH_TEST_TEMPORAL_BIN = temporal.binary;
  process.env.ZH_TEST_WORKFLOW_BUNDLE = bundlePath;
  (globalThis as Record<string, unknown>).__ZH_STACK__ = { store, temporal, dataDir };
}

function quietLogger() {
  const noop = () => undefined;
  return { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
}
