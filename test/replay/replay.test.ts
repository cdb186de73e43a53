/**
 * Replays saved workflow histories against the current workflow code: a change that would break running
 * workflows (non-determinism) fails here. Histories are recorded with
 *   RECORD_HISTORIES=1 npx jest test/workflows
 * (the tlog witness workflow's, which needs live witnesses: RECORD_HISTORIES=1 npx jest test/api/tlog-cosignatures.test.ts
 * test/api/tlog-federation.test.ts)
 * and committed; record new ones when a workflow gains a path, and keep old ones while such workflows may run.
 * The replay itself runs in its own process (scripts/replay-histories.ts): protobufjs and jest's module registry
 * do not mix.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const dir = path.join(__dirname, 'histories');
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));

describe('workflow replay', () => {
  it('has a saved history for every workflow', () => {
    const workflows = Object.keys(require('../../workflows'));
    const covered = new Set(
      files.map(
        (f) =>
          JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')).events[0].workflowExecutionStartedEventAttributes
            .workflowType.name
      )
    );
    expect(workflows.filter((w) => !covered.has(w))).toEqual([]);
  });

  it('replays every saved history deterministically', () => {
    const run = spawnSync(
      path.join(ROOT, 'node_modules', '.bin', 'tsx'),
      [path.join(ROOT, 'scripts', 'replay-histories.ts')],
      {
        env: { ...process.env, WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE },
        encoding: 'utf8'
      }
    );
    expect(run.stdout).toContain(`${files.length} replayed, 0 failed`);
    expect(run.status).toBe(0);
  });
});
