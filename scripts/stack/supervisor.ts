/**
 * Keeps one of the stack's processes running for the launcher (scripts/start.ts). When it dies on its own (a crash,
 * the out-of-memory killer, `kill -9`), it is started again after a back-off, and the log says why it died. After
 * RESTART_POLICY.maxRestarts deaths within RESTART_POLICY.windowMs the supervisor gives up: something is wrong that
 * restarting does not fix (a bad configuration, a port someone else holds, a database that is gone), and the
 * launcher stops everything with a message naming the process and its last exit. A process that exits with code 78
 * (EX_CONFIG, core/config-check.node.ts) stopped on invalid configuration: it is not restarted at all, and the launcher
 * stops everything and exits with that code (the process's own message, naming the setting, is the last it said).
 */
import { EX_CONFIG } from '../../core/config-check.node';
import { log, ServerHandle } from './process';

export const RESTART_POLICY = {
  /** Restarts allowed within windowMs; one more death and the stack stops. */
  maxRestarts: 5,
  windowMs: 120_000,
  /** The wait before the n-th restart within the window: initialBackoffMs × 2^(n-1), at most maxBackoffMs. */
  initialBackoffMs: 500,
  maxBackoffMs: 10_000
} as const;

export function backoffMs(restart: number): number {
  return Math.min(RESTART_POLICY.initialBackoffMs * 2 ** (restart - 1), RESTART_POLICY.maxBackoffMs);
}

export class Supervised {
  private handle: ServerHandle | null = null;
  private deaths: number[] = [];
  private stopped = false;
  private restartTimer: NodeJS.Timeout | null = null;
  /** A restart under way (the server may take a while to listen); stop() waits for it. */
  private starting: Promise<void> | null = null;

  constructor(
    readonly name: string,
    private readonly start: () => Promise<ServerHandle> | ServerHandle,
    /**
     * Called once, when the supervisor gives up; the launcher then stops everything and exits with `exitCode`
     * (EX_CONFIG after invalid configuration, else 1).
     */
    private readonly onGiveUp: (message: string, exitCode: number) => void
  ) {}

  /** The first start; its failure is the caller's (the launcher stops, as before any supervision). */
  async run(): Promise<void> {
    this.adopt(await this.start());
  }

  get current(): ServerHandle | null {
    return this.handle;
  }

  /** Graceful stop: no more restarts; SIGTERM (PostgreSQL: SIGINT), so the process drains (SIGKILL after 20 s). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.starting?.catch(() => undefined);
    await this.handle?.stop();
  }

  private adopt(handle: ServerHandle): void {
    this.handle = handle;
    void handle.exited.then((code) => {
      if (this.stopped || this.handle !== handle) return;
      if (code === EX_CONFIG) {
        this.stopped = true;
        this.onGiveUp(
          `${this.name} stopped on invalid configuration (exit code ${EX_CONFIG}); not restarting it`,
          EX_CONFIG
        );
        return;
      }
      this.died(handle.exitReason() ?? 'exited');
    });
  }

  private died(reason: string): void {
    const now = Date.now();
    this.deaths = this.deaths.filter((t) => now - t < RESTART_POLICY.windowMs);
    this.deaths.push(now);
    const windowS = RESTART_POLICY.windowMs / 1000;
    const why = reason === 'killed by SIGKILL' ? `${reason}: kill -9 or the out-of-memory killer` : reason;
    if (this.deaths.length > RESTART_POLICY.maxRestarts) {
      this.stopped = true;
      this.onGiveUp(
        `${this.name} died ${this.deaths.length} times within ${windowS} s (last: ${why}); giving up, ` +
          `restarting does not help (see its last lines above)`,
        1
      );
      return;
    }
    const wait = backoffMs(this.deaths.length);
    log(
      `${this.name} died (${why}); restarting it in ${wait / 1000} s ` +
        `(restart ${this.deaths.length} of at most ${RESTART_POLICY.maxRestarts} within ${windowS} s)`
    );
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.stopped) return;
      this.starting = (async () => {
        try {
          const handle = await this.start();
          if (this.stopped) {
            await handle.stop();
            return;
          }
          this.adopt(handle);
          log(`${this.name} restarted (pid ${handle.child.pid})`);
        } catch (err) {
          if (!this.stopped)
            this.died(`its restart failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
        } finally {
          this.starting = null;
        }
      })();
    }, wait);
  }
}

/**
 * A repeat of the same signal this soon after the first is the same Ctrl-C: a terminal sends SIGINT to the whole
 * foreground process group, so under `npm start` the launcher gets it once from the terminal and once more from
 * npm, which forwards it to its child. Only a signal after this counts as a second Ctrl-C (kill at once).
 */
export const SIGNAL_ECHO_MS = 1000;
