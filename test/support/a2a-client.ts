/**
 * Runs test/support/a2a-client-child.ts (an @a2a-js/sdk client in a process of its own): how the node SDK tests
 * hand their nodes tasks the way an A2A client does, and read back what that client sees.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface A2AWork {
  messageId: string;
  taskType: string;
  capabilities: string[];
  data: Record<string, unknown>;
}

export interface A2ATaskSeen {
  id: string;
  state: string;
  /** The value of every data part of the task's artifacts. */
  artifacts: unknown[];
  /** The text of the status message, if any. */
  message: string | null;
}

function run(base: string, headers: Record<string, string>, command: string, argument: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        pathToFileURL(require.resolve('tsx')).href,
        path.join(__dirname, 'a2a-client-child.ts'),
        base,
        command,
        JSON.stringify(argument)
      ],
      { env: { ...process.env, A2A_HEADERS: JSON.stringify(headers) } }
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill(), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(JSON.parse(out));
      else reject(new Error(`a2a-client-child.ts ${command} failed (${code}): ${err}`));
    });
  });
}

/** Sends each item as an A2A message (SendMessage, returnImmediately); the ids of the tasks made, in order. */
export const sendA2AWork = (base: string, headers: Record<string, string>, work: A2AWork[]) =>
  run(base, headers, 'send', work) as Promise<string[]>;

/** GetTask of each id, as the A2A client sees it. */
export const getA2ATasks = (base: string, headers: Record<string, string>, ids: string[]) =>
  run(base, headers, 'get', ids) as Promise<A2ATaskSeen[]>;
