/**
 * Saves a workflow's history where the replay test reads it (test/replay/histories/<name>.json), as the Temporal CLI
 * shows it: of run `runId`, else of the workflow's latest run. Callers record only with RECORD_HISTORIES=1.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export function saveWorkflowHistory(address: string, workflowId: string, name: string, runId?: string): void {
  const json = execFileSync(
    process.env.ZH_TEST_TEMPORAL_BIN!,
    [
      'workflow',
      'show',
      '--workflow-id',
      workflowId,
      ...(runId ? ['--run-id', runId] : []),
      '--address',
      address,
      '--namespace',
      'default',
      '--output',
      'json'
    ],
    { encoding: 'utf8' }
  );
  const dir = path.join(__dirname, '..', 'replay', 'histories');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${name}.json`), json);
}
