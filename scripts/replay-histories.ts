/**
 * Replays every saved history in test/replay/histories against the current workflow code (a prebuilt bundle via
 * WORKFLOW_BUNDLE_PATH, or bundled now). Exits non-zero naming each history that no longer replays: a change
 * that would break running workflows. Run by test/replay/replay.test.ts, and by hand before an SDK upgrade.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Runtime, Worker, makeTelemetryFilterString } from '@temporalio/worker';

async function main(): Promise<void> {
  Runtime.install({ telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
  const dir = path.join(__dirname, '..', 'test', 'replay', 'histories');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  const code = process.env.WORKFLOW_BUNDLE_PATH
    ? { workflowBundle: { codePath: process.env.WORKFLOW_BUNDLE_PATH } }
    : { workflowsPath: require.resolve('../workflows') };
  let failed = 0;
  for (const file of files) {
    const history = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    try {
      await Worker.runReplayHistory(code, history, file);
      console.log(`replayed ${file}`);
    } catch (err) {
      failed += 1;
      console.log(`FAILED ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  console.log(`${files.length - failed} replayed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

void main();
