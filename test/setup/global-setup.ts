/**
 * Starts the embedded stack once per jest run, on free loopback ports in a scratch data dir: FerretDB and the
 * Temporal dev server (headless). Bundles the workflow code once. Suites read where things are from env.
 * The ports are left to startFerretDb/startTemporal, so a start that finds one taken is tried again on new ones.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startFerretDb } from '../../scripts/stack/ferretdb';
import { startTemporal } from '../../scripts/stack/temporal';

export default async function globalSetup(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-test-'));
  const [ferret, temporal] = await Promise.all([
    startFerretDb({ dataDir, echo: false }),
    startTemporal({ dataDir, namespace: 'default', headless: true, echo: false })
  ]);
  const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quietLogger() });
  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, bundle.code);

  process.env.ZH_TEST_DATA_DIR = dataDir;
  process.env.ZH_TEST_MONGODB_URI = ferret.uri;
  process.env.ZH_TEST_FERRETDB_PORT = String(ferret.port);
  process.env.ZH_TEST_TEMPORAL_ADDRESS = temporal.address;
  process.env.ZH_TEST_TEMPORAL_BIN = temporal.binary;
  process.env.ZH_TEST_WORKFLOW_BUNDLE = bundlePath;
  (globalThis as Record<string, unknown>).__ZH_STACK__ = { ferret, temporal, dataDir };
}

function quietLogger() {
  const noop = () => undefined;
  return { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
}
