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
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError } from '../../core/errors';

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
      log.warn({ gate: this.name, limit: this.limit, refused: this.refused - logging.refusedBefore, refused_total: this.refused }, `admission: ${this.name} refused requests at its limit (503 overloaded)`);
    }, REFUSALS_LOGGED_EVERY_MS).unref();
  }

  get active(): number {
    return this.inFlight;
  }

  /** Takes a place, or returns null when the gate is full; the returned function gives the place back (once). */
  tryEnter(): (() => void) | null {
    if (this.inFlight >= this.limit) {
      this.refused++;
      return null;
    }
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

function admissionPlugin(app: FastifyInstance, opts: { gates: AdmissionGates }): void {
  app.addHook('onRequest', async (request, reply) => {
    const name = request.routeOptions.config.admission;
    if (!name) return;
    const gate = opts.gates[name];
    const leave = gate.tryEnter();
    if (!leave) {
      gate.logRefusals(app.log);
      throw new AppError('overloaded', `This process is at its limit of ${gate.limit} concurrent ${name.replace('_', ' ')}s; retry shortly`, { limit: gate.limit }, { 'Retry-After': '1' });
    }
    reply.raw.once('close', leave);
  });
}

export default fp(admissionPlugin, { name: 'admission' });
