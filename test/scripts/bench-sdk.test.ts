/**
 * `npm run bench:sdk`, CI-sized: 20 writes per client. Figures are printed, not asserted: this proves the bench runs
 * end to end (the stack, the floor, the TypeScript SDK with its two no-SDK controls, the Python node with the CI venv)
 * and that each client's writes landed in the ledger once each.
 */
import fs from 'node:fs';
import { runBench } from './run-bench';

it('bench:sdk, CI-sized: the floor and both SDKs land every write once, and the output has every line', async () => {
  const { code, output } = await runBench('bench:sdk', { BENCH_SDK_WRITES: '20' });
  if (code !== 0) console.log(output);
  expect(code).toBe(0);
  for (const client of ['no SDK: one POST at a time', 'TypeScript SDK', 'Python SDK'])
    expect(output).toMatch(
      new RegExp(
        `\\n\\| ${client} \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+ \\| \\d+ \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+ s \\| \\d+ \\| 20 \\(20\\) \\|`
      )
    );
  // The no-SDK controls timed beside the TypeScript calls: p50, p99, max, calls over 1 ms.
  for (const control of ['a journal line built \\(no SDK, no system call\\)', 'a journal line built and written'])
    expect(output).toMatch(
      new RegExp(`\\n\\| control: ${control}[^|]* \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+ \\| \\d+ \\|`)
    );
  const named = /the stack's log: (\S+)/.exec(output);
  expect(named).not.toBeNull();
  fs.rmSync(named![1]!, { force: true });
}, 240_000);
