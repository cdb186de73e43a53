/**
 * Reads shared by requests that arrive together: a request joins the read that has not started yet for its key
 * (or starts one); while a read is in flight the next one waits for it to end and then serves everyone who asked
 * meanwhile. Every read a request gets started after the request arrived, so a change made before a request
 * arrived is always seen by it (an API key's revocation, the ledger's head), and a key busy on many connections
 * costs one read per round trip.
 */
export class FreshReads<T> {
  private readonly inFlight = new Map<string, Promise<T>>();
  private readonly next = new Map<string, Promise<T>>();

  constructor(private readonly read: (id: string) => Promise<T>) {}

  get(id: string): Promise<T> {
    const queued = this.next.get(id);
    if (queued) return queued;
    const running = this.inFlight.get(id);
    if (!running) return this.start(id);
    const after = running.then(
      () => undefined,
      () => undefined
    );
    const p = after.then(() => {
      this.next.delete(id);
      return this.start(id);
    });
    this.next.set(id, p);
    return p;
  }

  private start(id: string): Promise<T> {
    const p = this.read(id).finally(() => {
      if (this.inFlight.get(id) === p) this.inFlight.delete(id);
    });
    this.inFlight.set(id, p);
    return p;
  }
}
