/**
 * Group commit of single-document inserts into one collection: inserts asked for while earlier ones are in flight
 * (or in the same turn of the event loop) go to MongoDB together, as one unordered `insertMany`, and each caller
 * learns the fate of its own document (a duplicate `_id` still fails that one insert with code 11000, as
 * `insertOne` would). Under load the chat gateway then writes its limit slots and usage records in a few commands
 * per round trip instead of one command per request; alone, an insert waits for nothing.
 */
import type { Collection, Document, OptionalUnlessRequiredId } from 'mongodb';

interface Queued<T> {
  doc: OptionalUnlessRequiredId<T>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One document's failure inside a batch, with the server's code (11000: duplicate key). */
export class BatchedInsertError extends Error {
  constructor(
    message: string,
    readonly code: number | undefined
  ) {
    super(message);
  }
}

export class InsertBatcher<T extends Document> {
  private queue: Queued<T>[] = [];
  private inFlight = 0;
  private scheduled = false;
  private lingering: NodeJS.Timeout | null = null;
  private readonly sent = new Set<Promise<void>>();

  /**
   * `lingerMs`: how long an insert nobody waits for may wait for company (0: until the end of this turn of the
   * event loop). The chat usage records linger, so a key in steady use one request at a time still writes its
   * records a few per command, off the requests that follow; a full batch goes at once.
   */
  constructor(
    private readonly collection: Collection<T>,
    private readonly maxInFlight = 2,
    private readonly maxBatch = 256,
    private readonly lingerMs = 0
  ) {}

  insert(doc: OptionalUnlessRequiredId<T>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ doc, resolve, reject });
      if (this.lingerMs > 0 && this.queue.length < this.maxBatch) {
        this.lingering ??= setTimeout(() => {
          this.lingering = null;
          this.pump();
        }, this.lingerMs);
        return;
      }
      if (!this.scheduled) {
        // Inserts asked for in this turn of the event loop (a request's two slots, say) go together.
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  /** Sends what is waiting now and resolves once every insert asked for so far has been answered (for shutdown). */
  async flush(): Promise<void> {
    if (this.lingering) {
      clearTimeout(this.lingering);
      this.lingering = null;
    }
    this.pump();
    while (this.sent.size > 0 || this.queue.length > 0) {
      await Promise.all([...this.sent]);
      this.pump();
    }
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      const sending = this.send(batch).finally(() => {
        this.inFlight--;
        this.sent.delete(sending);
        this.pump();
      });
      this.sent.add(sending);
    }
  }

  private async send(batch: Queued<T>[]): Promise<void> {
    try {
      if (batch.length === 1) await this.collection.insertOne(batch[0]!.doc);
      else
        await this.collection.insertMany(
          batch.map((q) => q.doc),
          { ordered: false }
        );
      for (const q of batch) q.resolve();
    } catch (err) {
      const failed = writeErrorsOf(err);
      if (batch.length === 1 || !failed) {
        for (const q of batch) q.reject(err);
        return;
      }
      batch.forEach((q, i) => {
        const e = failed.get(i);
        if (e) q.reject(new BatchedInsertError(e.errmsg ?? 'insert failed', e.code));
        else q.resolve();
      });
    }
  }
}

/** The per-document errors of an unordered insertMany (index → error), or null when the whole command failed. */
export function writeErrorsOf(err: unknown): Map<number, { index: number; code?: number; errmsg?: string }> | null {
  const raw = (err as { writeErrors?: unknown }).writeErrors;
  if (!raw) return null;
  const list = (Array.isArray(raw) ? raw : [raw]) as {
    index: number;
    code?: number;
    errmsg?: string;
    err?: { index: number; code?: number; errmsg?: string };
  }[];
  const out = new Map<number, { index: number; code?: number; errmsg?: string }>();
  for (const w of list) {
    const e = typeof w.index === 'number' ? w : w.err;
    if (e && typeof e.index === 'number') out.set(e.index, e);
  }
  return out.size > 0 ? out : null;
}
