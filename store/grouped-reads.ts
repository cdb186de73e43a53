/**
 * Grouped reads by key: the keys asked for while one read is under way (or in the same turn of the event loop) go
 * together in the next, one read at a time, at most `chunk` keys a read; each caller gets its key's value. Where
 * every query scans its collection (FerretDB on SQLite), a burst of callers then costs one scan, not one each
 * (store/ledger/quota.ts: a process meeting the writes of 16 DIDs it had not seen that day).
 */
interface Waiting<V> {
  resolve: (value: V) => void;
  reject: (err: unknown) => void;
}

export class GroupedReads<V> {
  private readonly waiting = new Map<string, Waiting<V>[]>();
  private reading = false;

  /** `readMany` answers the keys it found; a key it did not is answered `missing`. */
  constructor(
    private readonly readMany: (keys: string[]) => Promise<Map<string, V>>,
    private readonly missing: V,
    private readonly chunk = 256
  ) {}

  read(key: string): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      const callers = this.waiting.get(key);
      if (callers) callers.push({ resolve, reject });
      else this.waiting.set(key, [{ resolve, reject }]);
      if (!this.reading) {
        this.reading = true;
        setImmediate(() => void this.pump());
      }
    });
  }

  private async pump(): Promise<void> {
    try {
      while (this.waiting.size > 0) {
        const batch = [...this.waiting].slice(0, this.chunk);
        for (const [key] of batch) this.waiting.delete(key);
        try {
          const found = await this.readMany(batch.map(([key]) => key));
          for (const [key, callers] of batch) for (const c of callers) c.resolve(found.has(key) ? found.get(key)! : this.missing);
        } catch (err) {
          for (const [, callers] of batch) for (const c of callers) c.reject(err);
        }
      }
    } finally {
      this.reading = false;
    }
  }
}
