/**
 * Admission control. A route that declares `config: { admission: '<gate>' }` passes through that gate, one per API
 * process and shared by its listeners: at most the gate's limit of such requests are in flight; one more is answered
 * `503 overloaded` with `Retry-After` at once, in the request's first hook: before its credentials are checked or its
 * body is read, so a refused request costs no database read, spends no quota and starts no work (a flood of refusals
 * must not starve the admitted writes). An anonymous or forged caller that is admitted is answered 401 at once and
 * gives its place back with that answer, so only authenticated writers can hold places.
 *
 * A request holds its place from admission until its response is finished or its connection closes. The work it
 * started is bounded separately (the truth write's deadline withdraws what has not started; see
 * api/routes/ledger/report.ts), so a client that hangs up cannot leave unbounded work behind.
 *
 * Refused before Fastify. A request for a gated route (its exact path, as clients send it) that meets a full gate is
 * answered by the listener's HTTP server itself (EarlyRefusals, installed by api/app.ts as the server's request
 * handler in front of Fastify's): the same 503, body and headers, without Fastify's request, logger, hooks and
 * serializer. Measured with 512 clients meeting a gate of 128 (bench:ledger's overload): a refusal through Fastify
 * cost the API process ~117 µs of CPU and its onset held the event loop for ~97 ms in one turn (every client's first
 * request at once), which GET /api/status then waited behind. Other spellings of the path (percent-encoded, say)
 * still meet the gate in the first hook below, as before.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError } from '../../core/errors';
import { errorBody } from './errors';

export type AdmissionGateName = 'truth_write';

declare module 'fastify' {
  interface FastifyContextConfig {
    admission?: AdmissionGateName;
  }
}

/** While a gate refuses requests, one warning per this interval says how many. */
const REFUSALS_LOGGED_EVERY_MS = 10_000;

export class AdmissionGate {
  private inFlight = 0;
  /** Requests refused since the process started. */
  refused = 0;

  constructor(
    readonly name: AdmissionGateName,
    readonly limit: number
  ) {}

  /** The refusals of the interval being logged (null: none pending). */
  private logging: { refusedBefore: number } | null = null;

  /**
   * Logs the refusals as one warning per REFUSALS_LOGGED_EVERY_MS while they happen (how many since the last one),
   * not a line per refusal: the gate is shared by the process's listeners, and so is its warning.
   */
  logRefusals(log: FastifyBaseLogger): void {
    if (this.logging) return;
    const logging = { refusedBefore: this.refused - 1 };
    this.logging = logging;
    setTimeout(() => {
      this.logging = null;
      log.warn(
        {
          gate: this.name,
          limit: this.limit,
          refused: this.refused - logging.refusedBefore,
          refused_total: this.refused
        },
        `admission: ${this.name} refused requests at its limit (503 overloaded)`
      );
    }, REFUSALS_LOGGED_EVERY_MS).unref();
  }

  get active(): number {
    return this.inFlight;
  }

  /** The error a refusal answers with. */
  refusal(): AppError {
    return new AppError(
      'overloaded',
      `This process is at its limit of ${this.limit} concurrent ${this.name.replace('_', ' ')}s; retry shortly`,
      { limit: this.limit },
      { 'Retry-After': '1' }
    );
  }

  /** Whether the gate is full now, counting the refusal if it is (tryEnter, and EarlyRefusals without a place). */
  refuses(): boolean {
    if (this.inFlight < this.limit) return false;
    this.refused++;
    return true;
  }

  /** Takes a place, or returns null when the gate is full; the returned function gives the place back (once). */
  tryEnter(): (() => void) | null {
    if (this.refuses()) return null;
    this.inFlight++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.inFlight--;
    };
  }
}

export type AdmissionGates = Record<AdmissionGateName, AdmissionGate>;

export function createAdmissionGates(limits: Record<AdmissionGateName, number>): AdmissionGates {
  return { truth_write: new AdmissionGate('truth_write', limits.truth_write) };
}

/**
 * One listener's refusals before Fastify (see the module comment): its gated routes by method and exact path, filled
 * in as the routes are registered (the admission plugin's onRoute hook).
 */
export class EarlyRefusals {
  private readonly routes = new Map<string, AdmissionGate>();
  private readonly refusals = new Map<AdmissionGate, AppError>();

  constructor(
    private readonly gates: AdmissionGates,
    /** Headers every answer of the listener carries besides X-Trace (api/app.ts responseHeaders). */
    private readonly responseHeaders: Record<string, string>,
    /** The request's trace id, as Fastify's genReqId gives it. */
    private readonly traceId: (request: IncomingMessage) => string,
    /** The listener's logger (the gates' refusal warnings). */
    private readonly log: FastifyBaseLogger
  ) {}

  /** A gated route (a path with parameters is left to the hook: its requests are not matched here). */
  add(method: string, url: string, gate: AdmissionGateName): void {
    if (/[:*]/.test(url)) return;
    this.routes.set(`${method} ${url}`, this.gates[gate]);
  }

  /** Answers the request 503 when its route's gate is full; false: Fastify takes it (and its hook enters the gate). */
  refuse(request: IncomingMessage, response: ServerResponse): boolean {
    if (this.routes.size === 0 || !request.url || !request.method) return false;
    const query = request.url.indexOf('?');
    const gate = this.routes.get(`${request.method} ${query < 0 ? request.url : request.url.slice(0, query)}`);
    if (!gate?.refuses()) return false;
    gate.logRefusals(this.log);
    const trace = this.traceId(request);
    // One per gate: read, never thrown (a stack taken per refusal was a tenth of a refusal's cost).
    let err = this.refusals.get(gate);
    if (!err) this.refusals.set(gate, (err = gate.refusal()));
    const body = JSON.stringify(errorBody(err, trace));
    response.writeHead(err.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-trace': trace,
      ...this.responseHeaders,
      ...err.headers
    });
    response.end(body);
    return true;
  }
}

function admissionPlugin(app: FastifyInstance, opts: { gates: AdmissionGates; early?: EarlyRefusals }): void {
  app.addHook('onRoute', (route) => {
    const gate = route.config?.admission;
    if (!gate || !opts.early) return;
    for (const method of Array.isArray(route.method) ? route.method : [route.method])
      opts.early.add(method.toUpperCase(), route.url, gate);
  });
  app.addHook('onRequest', async (request, reply) => {
    const name = request.routeOptions.config.admission;
    if (!name) return;
    const gate = opts.gates[name];
    const leave = gate.tryEnter();
    if (!leave) {
      gate.logRefusals(app.log);
      throw gate.refusal();
    }
    reply.raw.once('close', leave);
  });
}

export default fp(admissionPlugin, { name: 'admission' });
