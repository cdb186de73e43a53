/**
 * A circuit breaker per upstream provider, per API process: after `failures` consecutive failed calls the provider
 * is open (skipped; its models' fallbacks answer) for `cooldownMs`; then one trial call is let through (half-open):
 * its success closes the breaker, its failure opens it again. State is per process on purpose: it reflects what this
 * process sees of the network, and costs nothing on the request path.
 */

export type BreakerState = 'closed' | 'open' | 'half_open';

interface Entry {
  consecutiveFailures: number;
  openedAt: number | null;
  trialInFlight: boolean;
  lastError: string | null;
}

export class CircuitBreakers {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly failures: number,
    private readonly cooldownMs: number,
    private readonly now: () => number = Date.now
  ) {}

  private entry(name: string): Entry {
    let e = this.entries.get(name);
    if (!e) {
      e = { consecutiveFailures: 0, openedAt: null, trialInFlight: false, lastError: null };
      this.entries.set(name, e);
    }
    return e;
  }

  state(name: string): BreakerState {
    const e = this.entries.get(name);
    if (!e || e.openedAt === null) return 'closed';
    return this.now() - e.openedAt >= this.cooldownMs ? 'half_open' : 'open';
  }

  /** Whether a call may go to `name` now; a half-open breaker lets one trial through at a time. */
  admit(name: string): boolean {
    const state = this.state(name);
    if (state === 'closed') return true;
    if (state === 'open') return false;
    const e = this.entry(name);
    if (e.trialInFlight) return false;
    e.trialInFlight = true;
    return true;
  }

  success(name: string): void {
    const e = this.entry(name);
    e.consecutiveFailures = 0;
    e.openedAt = null;
    e.trialInFlight = false;
  }

  failure(name: string, reason: string): void {
    const e = this.entry(name);
    e.consecutiveFailures++;
    e.lastError = reason;
    if (e.trialInFlight || e.consecutiveFailures >= this.failures) e.openedAt = this.now();
    e.trialInFlight = false;
  }

  /** A call that ended without saying anything about the upstream (the client went away): frees a trial slot. */
  release(name: string): void {
    const e = this.entries.get(name);
    if (e) e.trialInFlight = false;
  }

  /** Seconds until an open breaker lets a trial through (0 when not open). */
  retryAfterS(name: string): number {
    const e = this.entries.get(name);
    if (!e || e.openedAt === null) return 0;
    return Math.max(0, Math.ceil((e.openedAt + this.cooldownMs - this.now()) / 1000));
  }

  snapshot(names: string[]): {
    name: string;
    state: BreakerState;
    consecutive_failures: number;
    retry_after_s: number;
    last_error: string | null;
  }[] {
    return names.map((name) => {
      const e = this.entries.get(name);
      return {
        name,
        state: this.state(name),
        consecutive_failures: e?.consecutiveFailures ?? 0,
        retry_after_s: this.retryAfterS(name),
        last_error: e?.lastError ?? null
      };
    });
  }
}
