/**
 * Runs test/support/a2a-client-child.ts (an @a2a-js/sdk client in a process of its own): how the node SDK tests
 * hand their nodes tasks the way an A2A client does, and read back what that client sees. runA2AClientScript runs
 * any such client script (also scripts/ci/check-agent-card.ts for test/api/agent-card-a2a.test.ts).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { typescriptProcess } from '../../scripts/stack/process';

export interface A2AWork {
  messageId: string;
  taskType: string;
  capabilities: string[];
  data: Record<string, unknown>;
}

export interface A2ATaskSeen {
  id: string;
  context_id: string | null;
  state: string;
  /** The value of every data part of the task's artifacts. */
  artifacts: unknown[];
  /** Each artifact's text parts, joined (artifacts without text left out). */
  texts: string[];
  /** The text of the status message, if any. */
  message: string | null;
}

/**
 * Runs `script` (TypeScript) with `args` in a process of its own, as an A2A client (the SDK's CommonJS build requires
 * ESM-only jose, which Node loads and jest's module runtime does not), the caller's credentials in A2A_HEADERS;
 * resolves with what it printed, rejects with its stderr when it fails or outlasts `timeoutMs`.
 */
export function runA2AClientScript(
  script: string,
  args: string[],
  headers: Record<string, string>,
  timeoutMs: number
): Promise<string> {
  return new Promise((resolve, reject) => {
    const { binary, args: tsx } = typescriptProcess(script);
    const child = spawn(binary, [...tsx, ...args], {
      env: { ...process.env, A2A_HEADERS: JSON.stringify(headers) }
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill(), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${[path.basename(script), ...args.slice(1, 2)].join(' ')} failed (${code}): ${err}`));
    });
  });
}

const run = async (base: string, headers: Record<string, string>, command: string, argument: unknown) =>
  JSON.parse(
    await runA2AClientScript(
      path.join(__dirname, 'a2a-client-child.ts'),
      [base, command, JSON.stringify(argument)],
      headers,
      60_000
    )
  ) as unknown;

/** Sends each item as an A2A message (SendMessage, returnImmediately); the ids of the tasks made, in order. */
export const sendA2AWork = (base: string, headers: Record<string, string>, work: A2AWork[]) =>
  run(base, headers, 'send', work) as Promise<string[]>;

/** SendMessage of a text answer to a task waiting for input (`contextId`: the task's). */
export const replyA2ATask = (
  base: string,
  headers: Record<string, string>,
  answer: { taskId: string; contextId: string; messageId: string; text: string }
) => run(base, headers, 'reply', answer) as Promise<string | null>;

/** GetTask of each id, as the A2A client sees it. */
export const getA2ATasks = (base: string, headers: Record<string, string>, ids: string[]) =>
  run(base, headers, 'get', ids) as Promise<A2ATaskSeen[]>;
