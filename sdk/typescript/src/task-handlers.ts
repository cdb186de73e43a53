/**
 * Task handlers that hand each task to something outside the node's process, as the CLI's `run --exec` and
 * `run --call` do: a shell command (the task's JSON on stdin, its result as JSON on stdout) or a local HTTP endpoint
 * (the task's JSON POSTed, its result as the JSON answer). Both stop the work when the task's signal aborts (the
 * submitter canceled, the claim was lost, the node stops) and give up after a timeout. The contract is in
 * docs/node-sdk.md (The CLI: working tasks).
 */
import { spawn } from 'node:child_process';
import type { ClaimedTask, TaskHandler } from './worker';

/** The most a command may print on stdout, or an endpoint answer: the hub takes a result of up to 1 MiB. */
const MAX_RESULT_BYTES = 1024 * 1024;
/** How much of a command's stderr is kept for a failure's reason. */
const STDERR_TAIL_BYTES = 8 * 1024;

export interface ShellTaskOptions {
  /** Kill the command and fail the task after this long (default 600 s). */
  timeoutMs?: number;
  /** Between SIGTERM and SIGKILL when the command is stopped (default 5 s). */
  killGraceMs?: number;
  /** Added to each command's environment (besides ZHONGSHU_TASK_*). */
  env?: Record<string, string>;
}

/**
 * Runs `command` with `/bin/sh -c` per task, in a process group of its own: the task's JSON on stdin; its id, type and
 * attempt in ZHONGSHU_TASK_ID, ZHONGSHU_TASK_TYPE and ZHONGSHU_TASK_ATTEMPT. Exit 0 completes the task with stdout,
 * a JSON object (empty stdout: `{}`); another exit status fails it with the end of stderr as the reason. A cancel, a
 * lost claim, a stop or the timeout sends SIGTERM to the group, then SIGKILL after `killGraceMs`; what the command
 * left running in its group when it exits is killed too.
 */
export function shellTaskHandler(command: string, options: ShellTaskOptions = {}): TaskHandler {
  const timeoutMs = options.timeoutMs ?? 600_000;
  const graceMs = options.killGraceMs ?? 5000;
  return (task, { signal }) =>
    new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new Error('stopped before the command started'));
      const child = spawn('/bin/sh', ['-c', command], {
        detached: true, // its own process group, so a stop reaches what the command started too
        stdio: ['pipe', 'pipe', 'pipe'],
        env: {
          ...process.env,
          ...options.env,
          ZHONGSHU_TASK_ID: task.task_id,
          ZHONGSHU_TASK_TYPE: task.type,
          ZHONGSHU_TASK_ATTEMPT: String(task.attempts)
        }
      });
      const group = (sig: NodeJS.Signals) => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, sig);
        } catch {
          // ESRCH: the group is gone already.
        }
      };
      let stopped: string | undefined; // the failure's reason, when the command was stopped
      let killTimer: NodeJS.Timeout | undefined;
      const stop = (why: string) => {
        if (stopped) return;
        stopped = why;
        group('SIGTERM');
        killTimer = setTimeout(() => group('SIGKILL'), graceMs);
      };
      const onAbort = () => stop(`the command was stopped (${String(signal.reason ?? 'aborted')})`);
      signal.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => stop(`the command timed out after ${formatSeconds(timeoutMs)}`), timeoutMs);

      const stdout: Buffer[] = [];
      let stdoutBytes = 0;
      let stderr = Buffer.alloc(0);
      child.stdout.on('data', (chunk: Buffer) => {
        stdoutBytes += chunk.length;
        if (stdoutBytes > MAX_RESULT_BYTES) stop("the command's output on stdout exceeded 1 MiB");
        else stdout.push(chunk);
      });
      child.stderr.on('data', (chunk: Buffer) => {
        stderr = Buffer.concat([stderr, chunk]);
        if (stderr.length > STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES);
      });
      // A command that does not read its stdin may exit before taking it all (EPIPE): not an error of the task.
      child.stdin.on('error', () => undefined);
      child.stdin.end(JSON.stringify(task));
      // Whatever the command left in its group (a background job) ends with it, and so does its hold on stdout.
      child.once('exit', () => group('SIGKILL'));

      child.once('error', (err) => {
        finish();
        reject(new Error(`the command could not start: ${err.message}`));
      });
      child.once('close', (code, sig) => {
        finish();
        if (stopped) return reject(new Error(stopped));
        if (code !== 0) {
          const tail = lastLines(stderr.toString('utf8'));
          const status = code === null ? `was killed by ${sig}` : `exited with status ${code}`;
          return reject(new Error(`the command ${status}${tail ? `: ${tail}` : ' (nothing on stderr)'}`));
        }
        try {
          resolve(parseResult(Buffer.concat(stdout).toString('utf8'), 'its stdout'));
        } catch (err) {
          reject(new Error(`the command exited with status 0, but ${(err as Error).message}`));
        }
      });
      function finish() {
        clearTimeout(timer);
        clearTimeout(killTimer);
        signal.removeEventListener('abort', onAbort);
      }
    });
}

export interface HttpTaskOptions {
  /** Abort the request and fail the task after this long (default 600 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/**
 * POSTs each task's JSON to `url` (headers X-Zhongshu-Task-Id and X-Zhongshu-Task-Type). A 2xx answer completes the
 * task with its body, a JSON object (an empty body: `{}`); any other answer fails it with the status and the start
 * of the body. A cancel, a lost claim, a stop or the timeout aborts the request (the endpoint sees the connection
 * close).
 */
export function httpTaskHandler(url: string, options: HttpTaskOptions = {}): TaskHandler {
  const timeoutMs = options.timeoutMs ?? 600_000;
  const fetchImpl = options.fetch ?? fetch;
  return async (task: ClaimedTask, { signal }) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const requestFailure = (err: Error, what = 'could not reach it') => {
      if (timeout.aborted) return new Error(`${url} did not answer within ${formatSeconds(timeoutMs)}`);
      if (signal.aborted) return new Error(`the request to ${url} was stopped (${String(signal.reason ?? 'aborted')})`);
      const e = err as Error & { cause?: { code?: string; message?: string } };
      const cause = e.cause?.code ?? e.cause?.message;
      return new Error(`${url}: ${what}: ${e.message}${cause ? ` (${cause})` : ''}`);
    };
    let res: Response;
    let text: string;
    try {
      res = await fetchImpl(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'x-zhongshu-task-id': task.task_id,
          'x-zhongshu-task-type': task.type
        },
        body: JSON.stringify(task),
        signal: AbortSignal.any([signal, timeout])
      });
    } catch (err) {
      throw requestFailure(err as Error);
    }
    try {
      text = await readCapped(res);
    } catch (err) {
      throw requestFailure(err as Error, 'its answer could not be read');
    }
    if (res.status < 200 || res.status > 299)
      throw new Error(`${url} answered ${res.status}${text.trim() ? `: ${text.trim().slice(0, 500)}` : ''}`);
    try {
      return parseResult(text, 'its answer');
    } catch (err) {
      throw new Error(`${url} answered ${res.status}, but ${(err as Error).message}`);
    }
  };
}

/** A result is a JSON object; nothing at all stands for `{}`. */
function parseResult(text: string, what: string): Record<string, unknown> {
  if (!text.trim()) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${what} is not JSON: ${JSON.stringify(text.trim().slice(0, 200))}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${what} is JSON but not an object: ${text.trim().slice(0, 200)}`);
  return value as Record<string, unknown>;
}

async function readCapped(res: Response): Promise<string> {
  if (!res.body) return '';
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.length;
    if (bytes > MAX_RESULT_BYTES) throw new Error('the answer exceeded 1 MiB');
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The end of a command's stderr, for a failure's reason: its last lines, up to about 800 characters. */
function lastLines(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const kept: string[] = [];
  let length = 0;
  for (let i = lines.length - 1; i >= 0 && length < 800; i--) {
    kept.unshift(lines[i]!);
    length += lines[i]!.length + 3;
  }
  const joined = kept.join(' | ');
  return joined.length > 800 ? `…${joined.slice(joined.length - 800)}` : joined;
}

const formatSeconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
