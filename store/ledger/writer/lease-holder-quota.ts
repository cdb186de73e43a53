/**
 * A replica's daily quota while another replica holds the writer lease: slots claimed from the holder a block at a
 * time (POST /internal/quota/consume through lease-holder-client.ts) and handed out here from memory.
 */
import type { DailyQuota } from '../daily-quota';
import { MAX_LEASE } from '../quota';

/** A block of slots from the holder unused this long is given back. */
const BLOCK_IDLE_MS = 2000;
/**
 * The first block of a counter: a request to the holder costs more than the holder's own claim (an insert it
 * group-commits), so a replica starts at a few slots rather than one (the holder caps it near the limit).
 */
const FIRST_BLOCK = 4;

/** What a fetch found: slots; none (the limit is reached); nobody to ask (no holder elsewhere, or not reached). */
type Fetched = 'slots' | 'limit' | 'nobody';

interface Block {
  scope: string;
  day: string;
  slots: number[];
  /** The block being fetched (one at a time per counter). */
  fetching: Promise<Fetched> | null;
  /** Slots the last fetch asked for. */
  size: number;
  waiting: number;
  lastUse: number;
  /** The last fetch found the limit reached, or nobody to ask: no top-up until a caller finds no slot. */
  exhausted: boolean;
  /** The last fetch brought fewer slots than asked (near the limit): no fetching ahead, as QuotaStore near it. */
  short: boolean;
}

/**
 * The daily quota of a replica that does not hold the writer lease: slots come from the holder a block at a time
 * (POST /internal/quota/consume: at most MAX_LEASE, twice the last block, at least FIRST_BLOCK and the callers
 * waiting) and are handed out here from memory, as the holder's QuotaStore hands out its own leases (the next block
 * is fetched once half of the last one is handed out), so a steady writer pays one request per block, not one per
 * write. Unused slots go back to the holder after BLOCK_IDLE_MS and when the process closes; a slot given back by a
 * withdrawn write returns to its block. Where no other process holds the lease (or it cannot be reached), `local`
 * counts. Exact whoever counts: every slot is a unique document, handed out once.
 */
export class SlotBlocks implements DailyQuota {
  private readonly blocks = new Map<string, Block>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly local: DailyQuota,
    /** Up to `count` slots from the holder; null when there is none elsewhere (or it was not reached). */
    private readonly fetchSlots: (scope: string, day: string, limit: number, count: number) => Promise<number[] | null>,
    private readonly giveBack: (scope: string, day: string, slots: number[]) => Promise<void>,
    private readonly onError: (err: unknown) => void
  ) {
    this.timer = setInterval(() => void this.giveBackIdle(Date.now() - BLOCK_IDLE_MS), BLOCK_IDLE_MS / 2);
    this.timer.unref();
  }

  async consume(
    scope: string,
    day: string,
    limit: number,
    how?: { direct?: boolean }
  ): Promise<{ allowed: boolean; count: number }> {
    // Closed: no block is fetched any more (what close gives back is then all there is).
    if (how?.direct || this.closed) return this.local.consume(scope, day, limit, how);
    const counter = `${scope}|${day}`;
    let block = this.blocks.get(counter);
    if (!block) {
      block = {
        scope,
        day,
        slots: [],
        fetching: null,
        size: 0,
        waiting: 0,
        lastUse: Date.now(),
        exhausted: false,
        short: false
      };
      this.blocks.set(counter, block);
    }
    block.lastUse = Date.now();
    for (;;) {
      const n = block.slots.shift(); // taken synchronously: no other caller here gets it
      if (n !== undefined) {
        this.topUp(block, limit);
        return { allowed: true, count: n };
      }
      if (!block.fetching && this.closed) return this.local.consume(scope, day, limit); // (closed meanwhile: no new fetch)
      const fetching = block.fetching ?? this.fetchBlock(block, limit);
      block.waiting++;
      let fetched: Fetched;
      try {
        fetched = await fetching;
      } finally {
        block.waiting--;
      }
      if (fetched === 'nobody') return this.local.consume(scope, day, limit); // nobody else counts: counted here
      if (fetched === 'limit' && block.slots.length === 0) return { allowed: false, count: limit + 1 };
      // (slots fetched and already taken by the other callers: fetch again)
    }
  }

  /**
   * Fetches the next block in the background once half of the last one is handed out, so a steady writer does not
   * wait for it (as QuotaStore tops up its own leases). Not after a fetch found the limit or nobody to ask.
   */
  private topUp(block: Block, limit: number): void {
    if (block.fetching || block.exhausted || block.short || this.closed || block.slots.length > block.size / 2) return;
    this.fetchBlock(block, limit).catch(() => undefined); // a failed top-up is retried by the next caller that finds no slot
  }

  /** Fetches the next block of `block`'s counter (the one fetch under way for it). */
  private fetchBlock(block: Block, limit: number): Promise<Fetched> {
    const size = Math.min(MAX_LEASE, Math.max(block.waiting + 1, 2 * block.size, FIRST_BLOCK));
    block.size = size;
    const fetching = this.fetchSlots(block.scope, block.day, limit, size)
      .then((slots): Fetched => {
        block.exhausted = slots === null || slots.length === 0;
        block.short = slots !== null && slots.length < size;
        block.lastUse = Date.now(); // (not given back at once after a slow fetch)
        if (slots === null) return 'nobody';
        block.slots.push(...slots);
        return slots.length === 0 ? 'limit' : 'slots';
      })
      .finally(() => (block.fetching = null));
    block.fetching = fetching;
    return fetching;
  }

  async refund(scope: string, day: string, n: number, how?: { direct?: boolean }): Promise<void> {
    // A refund forwarded here is made here, never sent on (no refund bouncing between two replicas).
    if (how?.direct) return this.local.refund(scope, day, n, how);
    const block = this.closed ? undefined : this.blocks.get(`${scope}|${day}`);
    if (block) {
      block.slots.unshift(n); // still this process's: handed out next, or given back with the block
      return;
    }
    await this.giveBack(scope, day, [n]);
  }

  /** Gives back every block unused since `before`. */
  private async giveBackIdle(before: number): Promise<void> {
    for (const [counter, block] of this.blocks) {
      if (block.lastUse > before || block.fetching) continue;
      this.blocks.delete(counter);
      // Not given back (the database failing): spent for the day, never a second use.
      if (block.slots.length > 0) await this.giveBack(block.scope, block.day, block.slots).catch(this.onError);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    // No fetch starts once closed (consume and topUp check); wait for those under way, then give every block back.
    for (let fetching = this.fetchesUnderWay(); fetching.length > 0; fetching = this.fetchesUnderWay())
      await Promise.allSettled(fetching);
    await this.giveBackIdle(Infinity);
  }

  private fetchesUnderWay(): Promise<Fetched>[] {
    return [...this.blocks.values()].flatMap((b) => (b.fetching ? [b.fetching] : []));
  }
}
