/** A loop's sleep that other code can cut short (new work arrived) and that a stop ends at once. */
export class Wake {
  private waiter: (() => void) | null = null;
  private kicked = false;

  kick(): void {
    this.kicked = true;
    this.waiter?.();
  }

  /** Resolves after `ms`, at the next kick (or at once if one came since the last wait), or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.kicked || signal.aborted) {
      this.kicked = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiter = null;
        this.kicked = false;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal.addEventListener('abort', done, { once: true });
      this.waiter = done;
    });
  }
}
