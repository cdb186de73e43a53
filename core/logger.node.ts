/**
 * Log options shared by the API and the worker: pino, credentials redacted wherever they appear. JSON lines (one
 * object per event) when the output is not a terminal or LOG_FORMAT=json; at a terminal (or LOG_FORMAT=pretty) one
 * readable line per event: time, process, level, message, its other fields, trace id (formatLogLine). The launcher
 * (scripts/start.ts) reads its children's JSON from pipes and formats their lines the same way at its terminal.
 */
import pino, { Logger } from 'pino';
import type { Config } from './config.node';

export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT (`json`, `pretty`); unset: pretty at a terminal, JSON otherwise. */
export function logFormat(out: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): LogFormat {
  if (env.LOG_FORMAT === 'json' || env.LOG_FORMAT === 'pretty') return env.LOG_FORMAT;
  return out.isTTY && env.TERM !== 'dumb' ? 'pretty' : 'json';
}

export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, name: string): Logger {
  const options: pino.LoggerOptions = {
    name,
    level: config.LOG_LEVEL,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-external-key"]',
        'req.headers["x-zr-token"]',
        'req.headers["x-capture-token"]',
        'req.headers["x-order-root"]',
        'req.headers["x-slim-group-key"]',
        '*.epoch_key',
        '*.api_key',
        '*.client_secret',
        '*.token',
        '*.order_root'
      ],
      censor: '[redacted]'
    }
  };
  if (logFormat() === 'json') return pino(options);
  const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
  // Formatted after pino has serialised (and redacted) the event; synchronous, as pino's own stdout is.
  return pino(options, {
    write: (line: string) => {
      process.stdout.write(`${formatLogLine(line, { color }) ?? line.trimEnd()}\n`);
    }
  });
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const COLORS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields shown in their own place, or not at all (pid and hostname say nothing at one terminal). */
const PLACED = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'trace_id', 'v']);
const MAX_FIELD = 160;

/** The pino level of a JSON log line (30 for info), or null for a line that is not one. */
export function levelOf(line: string): number | null {
  const event = parseEvent(line);
  return event ? (event.level as number) : null;
}

/**
 * One pino JSON line as one readable line, or null when `line` is not a pino event (the caller prints it as it is):
 *   `14:03:07.218 api    INFO  listening listener=main url=http://127.0.0.1:3000 trace_id=…`
 * `label` names the process (the launcher's name for its child; else the event's `name`). Other fields follow the
 * message as key=value (objects as compact JSON, cut at 160 characters); a request as `GET /path 200 4.1ms`; an error
 * as its type and message (the stack is in the JSON format).
 */
export function formatLogLine(line: string, opts: { label?: string; color?: boolean } = {}): string | null {
  const event = parseEvent(line);
  if (!event) return null;
  const level = event.level as number;
  const time = typeof event.time === 'number' ? clock(new Date(event.time)) : '--:--:--.---';
  const label = (opts.label ?? (typeof event.name === 'string' ? event.name : '')).padEnd(6);
  const levelName = (LEVELS[level] ?? String(level)).padEnd(5);
  const shownLevel = opts.color ? `\x1b[${COLORS[level] ?? '0'}m${levelName}\x1b[0m` : levelName;
  const parts = [time, label, shownLevel, typeof event.msg === 'string' ? oneLine(event.msg) : ''];
  const fields: string[] = [];
  const req = event.req as { method?: string; url?: string } | undefined;
  const res = event.res as { statusCode?: number } | undefined;
  // A request (Fastify's "incoming request" has req, "request completed" res and responseTime).
  const request = req && typeof req === 'object' && req.method ? `${req.method} ${req.url ?? ''}` : '';
  const status = res && typeof res === 'object' && res.statusCode ? String(res.statusCode) : '';
  const took = typeof event.responseTime === 'number' ? `${event.responseTime.toFixed(1)}ms` : '';
  const summary = [request, status, took].filter(Boolean).join(' ');
  if (summary) fields.push(summary);
  for (const [key, value] of Object.entries(event)) {
    if (PLACED.has(key) || value === undefined) continue;
    if ((request && key === 'req') || (status && key === 'res') || (took && key === 'responseTime')) continue;
    if (key === 'err' && value && typeof value === 'object') {
      const err = value as { type?: string; message?: string };
      fields.push(`err=${oneLine(`${err.type ?? 'Error'}: ${err.message ?? ''}`)}`);
      continue;
    }
    fields.push(`${key}=${cut(typeof value === 'string' ? oneLine(value) : JSON.stringify(value))}`);
  }
  if (typeof event.trace_id === 'string') fields.push(`trace_id=${event.trace_id}`);
  return [...parts, ...fields].filter(Boolean).join(' ');
}

function parseEvent(line: string): Record<string, unknown> | null {
  const text = line.trim();
  if (!text.startsWith('{')) return null;
  try {
    const event = JSON.parse(text) as unknown;
    if (!event || typeof event !== 'object' || Array.isArray(event)) return null;
    const level = (event as { level?: unknown }).level;
    return typeof level === 'number' ? (event as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Local wall-clock time to the millisecond: a terminal session lasts hours, not days. */
function clock(d: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ⏎ ');
}

function cut(text: string): string {
  return text.length > MAX_FIELD ? `${text.slice(0, MAX_FIELD - 1)}…` : text;
}
