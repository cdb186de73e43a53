/**
 * Logs a person can read: at a terminal one line per event (time, process, level, message, fields, trace id);
 * JSON stays JSON when the output is not a terminal (a pipe, a file, the launcher reading its children) or
 * LOG_FORMAT=json.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { formatLogLine, levelOf, logFormat } from '../../core/logger.node';
import { typescriptProcess } from '../../scripts/stack/process';

const ROOT = path.resolve(__dirname, '..', '..');
const at = new Date(2026, 0, 2, 14, 3, 7, 218).getTime();

it('formats a pino event as one line: time, process, level, message, fields, trace id', () => {
  const line = JSON.stringify({
    level: 30,
    time: at,
    pid: 4242,
    hostname: 'h',
    name: 'zhongshu-hub',
    msg: 'listening',
    listener: 'main',
    bind: '127.0.0.1:3000',
    trace_id: 'tr-1'
  });
  expect(formatLogLine(line, { label: 'api' })).toBe(
    '14:03:07.218 api    INFO  listening listener=main bind=127.0.0.1:3000 trace_id=tr-1'
  );
  // Without a label, the event's own name.
  expect(formatLogLine(line)).toMatch(/^14:03:07\.218 zhongshu-hub INFO  listening /);
});

it('shows a request as method, path, status and time, an error as type and message, never more than one line', () => {
  const request = JSON.stringify({
    level: 30,
    time: at,
    msg: 'request completed',
    req: { method: 'POST', url: '/api/report/truth', headers: { authorization: '[redacted]' } },
    res: { statusCode: 202 },
    responseTime: 4.123,
    trace_id: 'abc'
  });
  expect(formatLogLine(request, { label: 'api' })).toBe(
    '14:03:07.218 api    INFO  request completed POST /api/report/truth 202 4.1ms trace_id=abc'
  );
  const failure = JSON.stringify({
    level: 50,
    time: at,
    msg: 'append failed\nafter retries',
    err: { type: 'MongoServerError', message: 'boom', stack: 'MongoServerError: boom\n    at x' },
    detail: { a: 'x'.repeat(400) }
  });
  const text = formatLogLine(failure, { label: 'worker' })!;
  expect(text.split('\n')).toHaveLength(1);
  expect(text).toMatch(
    /^14:03:07\.218 worker ERROR append failed ⏎ after retries err=MongoServerError: boom detail=\{/
  );
  expect(text.length).toBeLessThan(260);
  // Colour only on the level, and only when asked.
  expect(formatLogLine(failure, { label: 'worker', color: true })).toContain('\x1b[31mERROR\x1b[0m');
});

it('leaves lines that are not pino events to be printed as they are', () => {
  expect(formatLogLine('time=2026-01-02 level=WARN msg="temporal says"')).toBeNull();
  expect(formatLogLine('{"not":"a log event"}')).toBeNull();
  expect(formatLogLine('{broken')).toBeNull();
  expect(levelOf('{"level":40,"msg":"w"}')).toBe(40);
  expect(levelOf('plain')).toBeNull();
});

it('chooses pretty only at a terminal, and LOG_FORMAT decides when set', () => {
  expect(logFormat({ isTTY: true }, {})).toBe('pretty');
  expect(logFormat({ isTTY: false }, {})).toBe('json');
  expect(logFormat({}, {})).toBe('json');
  expect(logFormat({ isTTY: true }, { LOG_FORMAT: 'json' })).toBe('json');
  expect(logFormat({ isTTY: true }, { TERM: 'dumb' })).toBe('json');
  expect(logFormat({ isTTY: false }, { LOG_FORMAT: 'pretty' })).toBe('pretty');
});

it("a process's logger writes JSON lines into a pipe, and readable lines with LOG_FORMAT=pretty", () => {
  const script = path.join(ROOT, 'test', 'scripts', 'log-child.ts');
  const { binary, args } = typescriptProcess(script);
  const run = (env: Record<string, string>) =>
    spawnSync(binary, [...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  const json = run({ LOG_FORMAT: '' });
  expect(json.status).toBe(0);
  const events = json.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(events).toEqual([
    expect.objectContaining({ level: 30, name: 'zhongshu-hub', msg: 'listening', listener: 'main', trace_id: 't-9' }),
    expect.objectContaining({ level: 40, msg: 'careful', creds: { token: '[redacted]' } })
  ]);
  const pretty = run({ LOG_FORMAT: 'pretty' });
  expect(pretty.stdout.trim().split('\n')).toEqual([
    expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} zhongshu-hub INFO  listening listener=main trace_id=t-9$/),
    expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} zhongshu-hub WARN  careful creds=\{"token":"\[redacted\]"\}$/)
  ]);
});
