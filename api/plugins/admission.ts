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
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError } from '../../core/errors';

export type AdmissionGateName = 'truth_write';

declare module 'fastify' {
  interface FastifyContextConfig {
    admission?: AdmissionGateName;
  }
}

export class AdmissionGate {
  private inFlight = 0;
  /** Requests refused since the process started (reported by /api/status). */
  refused = 0;

  constructor(
    readonly name: AdmissionGateName,
    readonly limit: number
  ) {}

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
      throw new AppError('overloaded', `This process is at its limit of ${gate.limit} concurrent ${name.replace('_', ' ')}s; retry shortly`, { limit: gate.limit }, { 'Retry-After': '1' });
    }
    reply.raw.once('close', leave);
  });
}

export default fp(admissionPlugin, { name: 'admission' });
