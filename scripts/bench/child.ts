/**
 * A bench's helper process: this file's module forked under tsx with an IPC channel, and its messages read one at a
 * time in order (a message sent before it is asked for waits; the child's exit fails whatever is still asked).
 */
import { ChildProcess, fork } from 'node:child_process';
import { pathToFileURL } from 'node:url';

export function forkBenchChild(
  file: string,
  args: string[],
  name: string
): { child: ChildProcess; next(): Promise<unknown> } {
  const child = fork(file, args, {
    execArgv: ['--import', pathToFileURL(require.resolve('tsx')).href],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc']
  });
  const messages: unknown[] = [];
  const waiters: ((m: unknown) => void)[] = [];
  child.on('message', (m) => (waiters.length ? waiters.shift()!(m) : messages.push(m)));
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      if (messages.length) return resolve(messages.shift());
      waiters.push(resolve);
      child.once('exit', (code) => reject(new Error(`${name} exited (${code})`)));
    });
  return { child, next };
}
