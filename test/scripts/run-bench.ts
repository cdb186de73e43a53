/**
 * Runs `npm run <script>` (a bench) as a person would, against a stack of its own: the test run's workflow bundle,
 * no MongoDB or Temporal address inherited from the test stack. Its exit code and everything it printed.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

export function runBench(
  script: string,
  env: Record<string, string>,
  onOutput: (text: string) => void = () => undefined
): Promise<{ code: number | null; output: string }> {
  const child = spawn('npm', ['run', script], {
    cwd: ROOT,
    env: {
      ...process.env,
      MONGODB_URI: '',
      TEMPORAL_ADDRESS: '',
      WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE!,
      ...env
    },
    stdio: ['ignore', 'pipe', 'pipe']
  });
  let output = '';
  child.stdout.on('data', (d) => onOutput((output += d)));
  child.stderr.on('data', (d) => onOutput((output += d)));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}
