/**
 * A replica's side of the writer lease (store/ledger/writer-lease.ts): its appends and its daily-quota claims go
 * over HTTP to the replica holding the lease, with `Authorization: Bearer <LEDGER_FORWARD_SECRET>`
 * (api/routes/ledger/writer.ts; the shapes in core/ledger/forwarded-writes.ts). One process then appends and counts
 * for every replica, as the cluster primary does for the processes of one host (ledger-forwarding.ts): apart, two
 * replicas writing one DID claimed the same quota slots, refused each other's inserts and re-read the DID's slots
 * of the day after every few refusals (bench:ledger, one DID at concurrency 16, FerretDB at a full core).
 * A truth write's slot goes with its append (`forwardCounted`, POST /internal/ledger/counted-append-batches: the
 * writes waiting while two requests are on their way go together in the next; /internal/ledger/counted-appends, one
 * per request, to a holder without the batch route); other claims take slots a block at a time (SlotBlocks below).
 * A holder without either (an older version: 404) is sent the claim and the append apart for a minute, and stays the
 * holder for everything else.
 *
 * What the caller gets, as for an append or a claim made here:
 *   - the entry (or the earlier one its Idempotency-Key matched); the slot (or a refusal past the limit); for a
 *     counted append, the entry or `over_quota`;
 *   - AppendWithdrawn when the holder withdrew an append at the caller's deadline before its batch began (nothing
 *     written; the caller gives its quota slot back, or for a counted append the holder did). The request itself
 *     is not cut at the deadline: the answer, which the holder sends by then at the latest for a write not begun,
 *     says what happened;
 *   - ForwardNotDelivered (appends; claims are then made here directly) when nothing reached the holder (connection
 *     refused, name not resolved, no connection within 2 s), or the holder refused it before doing anything (401 or
 *     404: another secret or an older version; 421: it gave the lease up; 400 or 413: this request): the ledger
 *     appends here instead. Safe: the holder did nothing. After a failure on the way or a 401/404/421 the holder is
 *     skipped for a lease period;
 *   - 503 (retry with the same Idempotency-Key) when the request was sent and no answer came, or the holder failed:
 *     the write may or may not have landed (a claimed slot may stay spent), as after a timeout of a direct append.
 */
import { Agent, errors as undiciErrors, request } from 'undici';
import type { z } from 'zod';
import { AppError } from '../../core/errors';
import { canonicalJson } from '../../core/ledger/canonical-json';
import {
  MAX_WITHDRAW_AFTER_MS,
  forwardedAppendAnswer,
  ForwardedAppendBody,
  forwardedCountedAppendAnswer,
  type ForwardedCountedAppendAnswer,
  forwardedCountedAppendBatchAnswer,
  type ForwardedCountedAppendBatchAnswer,
  type ForwardedCountedAppendBody,
  forwardedConsumeAnswer,
  FORWARD_BATCH_BYTES,
  MAX_FORWARD_BATCH,
  forwardedRefundAnswer,
  WRITER_APPENDS_PATH,
  WRITER_COUNTED_APPEND_BATCHES_PATH,
  WRITER_COUNTED_APPENDS_PATH,
  WRITER_QUOTA_CONSUME_PATH,
  WRITER_QUOTA_REFUND_PATH
} from '../../core/ledger/forwarded-writes';
import type { AppendInput, AppendResult } from './ledger';
import { AppendWithdrawn, ForwardNotDelivered } from './ledger';
import type { ForwardAppend, ForwardCountedAppend, QuotaClaim } from './ledger-forwarding';
import { MAX_LEASE, type DailyQuota } from './quota';
import type { LedgerWriterLease } from './writer-lease';

const CONNECT_TIMEOUT_MS = 2000;
/** A holder that answered 404 to a counted append is asked again after this long (it may have been upgraded). */
const COUNTED_ROUTE_RECHECK_MS = 60_000;
/** How long a request without a deadline (a quota claim, the hub's own events) waits for the holder's answer. */
const NO_DEADLINE_WAIT_MS = 30_000;
/** Beyond the withdrawal time: the holder's batch under way and the answer on its way back. */
const ANSWER_GRACE_MS = 10_000;

/** Errors raised before the request could have reached the holder. */
const NOT_DELIVERED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT'
]);

function notDelivered(err: unknown): boolean {
  if (err instanceof undiciErrors.ConnectTimeoutError) return true;
  const code =
    (err as { code?: unknown; cause?: { code?: unknown } }).code ?? (err as { cause?: { code?: unknown } }).cause?.code;
  return typeof code === 'string' && NOT_DELIVERED_CODES.has(code);
}

const unknownOutcome = (what: string) =>
  new AppError('unavailable', `${what}; retry with the same Idempotency-Key`, {}, { 'Retry-After': '5' });

export interface WriterForwarding {
  /** The Ledger's `forward`: to the holder when another process holds the lease, else null (append here). */
  forward: ForwardAppend;
  /** The Ledger's `forwardCounted`: a truth write's slot and append, to the holder in one request; else null. */
  forwardCounted: ForwardCountedAppend;
  /** The quota: slots from the holder a block at a time when another process holds the lease, else `local`'s. */
  quota(local: DailyQuota): DailyQuota;
  close(): Promise<void>;
}

/**
 * Forwards appends and quota claims to the lease holder when it is another process; `onError` hears of holders that
 * refused us, `onAnswered` of each request of appends the holder answered.
 */
export function forwardToWriter(
  lease: LedgerWriterLease,
  secret: string,
  onError: (err: unknown) => void,
  onAnswered: () => void = () => undefined
): WriterForwarding {
  const agent = new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS }, keepAliveTimeout: 30_000 });
  const closers: (() => Promise<void>)[] = [];

  /**
   * Holders found without the counted-appends route (an older version answering 404), until when: their truth
   * writes go as a quota claim and an append, the two routes such a holder has, instead of turning forwarding off.
   */
  const countedRouteMissing = new Map<string, number>();
  /** Holders found without the batch route (an older version), until when: their counted appends go one per request. */
  const batchRouteMissing = new Map<string, number>();

  /** POSTs `body` to the holder at `url` and parses its 200 answer with `answer`; see the module comment for failures. */
  const post = async <T>(
    url: string,
    path: string,
    body: unknown,
    waitMs: number,
    answer: z.ZodType<T>
  ): Promise<T> => {
    let status: number;
    let text: string;
    try {
      const res = await request(`${url}${path}`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: waitMs,
        bodyTimeout: waitMs
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      lease.skip(url);
      if (notDelivered(err)) throw new ForwardNotDelivered(`the ledger writer at ${url} cannot be reached`);
      throw unknownOutcome('The ledger writer did not answer');
    }
    // Refused before anything was done there: done here instead.
    if (status === 421) {
      lease.skip(url); // it gave the lease up (stopping): another replica takes it at its next renewal
      throw new ForwardNotDelivered(`the ledger writer at ${url} no longer holds the lease`);
    }
    if (status === 404 && path === WRITER_COUNTED_APPENDS_PATH) {
      countedRouteMissing.set(url, Date.now() + COUNTED_ROUTE_RECHECK_MS);
      throw new ForwardNotDelivered(
        `the ledger writer at ${url} has no ${path} (an older version): claim and append apart`
      );
    }
    if (status === 404 && path === WRITER_COUNTED_APPEND_BATCHES_PATH) {
      batchRouteMissing.set(url, Date.now() + COUNTED_ROUTE_RECHECK_MS);
      throw new BatchRouteMissing();
    }
    if (status === 401 || status === 404) {
      // A different LEDGER_FORWARD_SECRET there, or a version without the route.
      lease.skip(url);
      onError(
        new Error(
          `the ledger writer at ${url} answered ${status} to ${path} (is LEDGER_FORWARD_SECRET the same on every replica?); appending here for a lease period`
        )
      );
      throw new ForwardNotDelivered(`the ledger writer at ${url} refused ${path} (${status})`);
    }
    if (status === 400 || status === 413) {
      // This request only (a value larger than the route takes, say): a version mismatch worth a warning.
      onError(
        new Error(`the ledger writer at ${url} answered ${status} to ${path}: ${text.slice(0, 300)}; done here instead`)
      );
      throw new ForwardNotDelivered(`the ledger writer at ${url} refused ${path} (${status})`);
    }
    if (status !== 200) throw unknownOutcome(`The ledger writer answered ${status}`);
    const parsed = answer.safeParse(safeJson(text));
    if (!parsed.success) throw unknownOutcome(`The ledger writer's answer to ${path} is not one`);
    if (APPEND_PATHS.has(path)) onAnswered();
    return parsed.data;
  };

  const appendBody = (input: AppendInput, deadline: number | null): ForwardedAppendBody => ({
    kind: input.kind,
    key: input.key,
    value_json: canonicalJson(input.value),
    truth_type: input.truth_type ?? null,
    did: input.did ?? null,
    idempotency_key: input.idempotencyKey ?? null,
    ...withdrawAfter(deadline)
  });
  /** How long to wait for the holder's answer to `body`. */
  const answerWait = (body: ForwardedAppendBody) => (body.withdraw_after_ms ?? NO_DEADLINE_WAIT_MS) + ANSWER_GRACE_MS;

  const append = async (url: string, input: AppendInput, deadline: number | null): Promise<AppendResult> => {
    const body = appendBody(input, deadline);
    const answer = await post(url, WRITER_APPENDS_PATH, body, answerWait(body), forwardedAppendAnswer);
    if (answer.withdrawn) throw new AppendWithdrawn();
    return { entry: answer.entry, duplicate: answer.duplicate };
  };

  const appendCounted = async (
    url: string,
    input: AppendInput,
    quota: QuotaClaim,
    deadline: number | null
  ): Promise<AppendResult | 'over_quota'> => {
    const body = { ...appendBody(input, deadline), quota };
    return countedResult(
      await post(url, WRITER_COUNTED_APPENDS_PATH, body, answerWait(body), forwardedCountedAppendAnswer)
    );
  };
  /** Each write alone, as before the batch route (an older holder): nothing of them was sent yet. */
  const appendEachCounted = (url: string, jobs: CountedJob[]) =>
    jobs.forEach((job) => job.settle(appendCounted(url, job.input, job.body.quota, job.deadline)));

  /**
   * Counted appends on their way to each holder: at most BATCHES_IN_FLIGHT requests at a time, the writes that come
   * meanwhile waiting in `waiting` and going together in the next request (see CountedBatches).
   */
  const batches = new Map<string, CountedBatches>();
  const sendBatch = async (url: string, jobs: CountedJob[]): Promise<void> => {
    // While these waited: the holder failed (skipped for a lease period) or gave the lease up, or it turned out to
    // have no batch route. Nothing of them was sent: done here, or one per request.
    if (lease.writerElsewhere() !== url) {
      jobs.forEach((job) =>
        job.settle(
          Promise.reject(new ForwardNotDelivered(`the ledger writer at ${url} is no longer the one to send to`))
        )
      );
      return;
    }
    if ((batchRouteMissing.get(url) ?? 0) > Date.now()) return appendEachCounted(url, jobs);
    const bodies = jobs.map((job) => ({ ...job.body, ...withdrawAfter(job.deadline) }));
    let answers: ForwardedCountedAppendBatchAnswer['answers'];
    try {
      const waitMs = Math.max(...bodies.map(answerWait));
      ({ answers } = await post(
        url,
        WRITER_COUNTED_APPEND_BATCHES_PATH,
        { writes: bodies },
        waitMs,
        forwardedCountedAppendBatchAnswer
      ));
      if (answers.length !== jobs.length)
        throw unknownOutcome(`The ledger writer answered ${answers.length} of ${jobs.length} writes`);
    } catch (err) {
      if (err instanceof BatchRouteMissing) return appendEachCounted(url, jobs); // nothing was done there
      jobs.forEach((job) => job.settle(Promise.reject(err)));
      return;
    }
    answers.forEach((answer, i) => jobs[i]!.settle(Promise.resolve(answer).then(countedResult)));
  };
  const countedBatches = (url: string): CountedBatches => {
    let queue = batches.get(url);
    if (!queue) {
      queue = new CountedBatches((jobs) => sendBatch(url, jobs));
      batches.set(url, queue);
    }
    return queue;
  };

  /** `remote` at the holder when there is one elsewhere; `here` when there is none or nothing reached it. */
  const atHolder = async <T>(remote: (url: string) => Promise<T>, here: () => Promise<T>): Promise<T> => {
    const url = lease.writerElsewhere();
    if (!url) return here();
    try {
      return await remote(url);
    } catch (err) {
      if (err instanceof ForwardNotDelivered) return here();
      throw err;
    }
  };

  return {
    forward: (input, signal, how) => {
      if (how.direct) return null;
      const url = lease.writerElsewhere();
      if (!url) return null;
      if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
      return append(url, input, how.deadline);
    },
    forwardCounted: (input, quota, signal, deadline) => {
      const url = lease.writerElsewhere();
      if (!url || (countedRouteMissing.get(url) ?? 0) > Date.now()) return null;
      if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
      if ((batchRouteMissing.get(url) ?? 0) > Date.now()) return appendCounted(url, input, quota, deadline);
      return countedBatches(url).add(input, { ...appendBody(input, null), quota }, deadline, signal);
    },
    quota: (local) => {
      const blocks = new SlotBlocks(
        local,
        (scope, day, limit, count) =>
          atHolder(
            async (url) =>
              (
                await post(
                  url,
                  WRITER_QUOTA_CONSUME_PATH,
                  { scope, day, limit, count },
                  NO_DEADLINE_WAIT_MS,
                  forwardedConsumeAnswer
                )
              ).slots,
            async () => null
          ),
        // Slots given back where they were not taken are still slots of the day given back: whoever holds the
        // counter hands them out again or deletes them (QuotaStore.refund).
        (scope, day, slots) =>
          atHolder(
            async (url) => {
              await post(
                url,
                WRITER_QUOTA_REFUND_PATH,
                { scope, day, slots },
                NO_DEADLINE_WAIT_MS,
                forwardedRefundAnswer
              );
            },
            async () => {
              for (const n of slots) await local.refund(scope, day, n);
            }
          ),
        onError
      );
      closers.push(() => blocks.close());
      return blocks;
    },
    close: async () => {
      await Promise.all(closers.map((c) => c()));
      await agent.close();
    }
  };
}

const APPEND_PATHS = new Set([WRITER_APPENDS_PATH, WRITER_COUNTED_APPENDS_PATH, WRITER_COUNTED_APPEND_BATCHES_PATH]);

/** What a counted append's answer, alone or in a batch, means to its caller: a result, `over_quota`, or a throw. */
function countedResult(
  answer: ForwardedCountedAppendAnswer | ForwardedCountedAppendBatchAnswer['answers'][number]
): AppendResult | 'over_quota' {
  if (answer.outcome === 'appended') return { entry: answer.entry, duplicate: answer.duplicate };
  if (answer.outcome === 'over_quota') return 'over_quota';
  if (answer.outcome === 'withdrawn') throw new AppendWithdrawn();
  throw unknownOutcome(`The ledger writer failed: ${answer.message}`);
}

/** The holder has no batch route (an older version answering 404): nothing was done there. */
class BatchRouteMissing extends Error {}

/** Requests of counted appends on their way to one holder at a time: one being answered while the next is read. */
const BATCHES_IN_FLIGHT = 2;

/** A counted append waiting to be sent; `settle` answers its caller. */
interface CountedJob {
  input: AppendInput;
  /** Its part of the request, but for the time left to its deadline (taken when it is sent). */
  body: ForwardedCountedAppendBody;
  deadline: number | null;
  /**
   * About that part's size as JSON: the value's text counted once, though escaping its quotes can make it up to twice
   * that in the body (the budget only keeps batches small; the holder takes 16 MiB).
   */
  bytes: number;
  settle(outcome: Promise<AppendResult | 'over_quota'>): void;
}

/**
 * The counted appends of one holder, group-sent: a write is sent at once when fewer than BATCHES_IN_FLIGHT requests
 * are on their way (so a lone writer waits for nothing), else it waits for one of them to be answered and goes with
 * every write that came meanwhile, in one request of at most MAX_FORWARD_BATCH writes and about FORWARD_BATCH_BYTES
 * (a larger write alone). The holder answers each write in its place; what befalls the request befalls all of them
 * (refused before anything was done, 400 for one bad value included: all appended here; no answer: all 503). A write
 * whose caller gives up (its signal) while it waits here is withdrawn unsent.
 */
class CountedBatches {
  private readonly waiting: CountedJob[] = [];
  private inFlight = 0;

  constructor(private readonly send: (jobs: CountedJob[]) => Promise<void>) {}

  add(
    input: AppendInput,
    body: ForwardedCountedAppendBody,
    deadline: number | null,
    signal: AbortSignal | undefined
  ): Promise<AppendResult | 'over_quota'> {
    return new Promise((resolve, reject) => {
      const withdraw = () => {
        const at = this.waiting.indexOf(job);
        if (at < 0) return; // on its way: the holder withdraws it at its deadline
        this.waiting.splice(at, 1);
        reject(new AppendWithdrawn());
      };
      const job: CountedJob = {
        input,
        body,
        deadline,
        bytes:
          Buffer.byteLength(body.value_json) +
          3 *
            (body.key.length +
              (body.did?.length ?? 0) +
              (body.idempotency_key?.length ?? 0) +
              body.quota.scope.length) +
          256,
        settle: (outcome) => {
          signal?.removeEventListener('abort', withdraw);
          outcome.then(resolve, reject);
        }
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      this.waiting.push(job);
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < BATCHES_IN_FLIGHT && this.waiting.length > 0) {
      let bytes = 0;
      let count = 0;
      while (
        count < this.waiting.length &&
        count < MAX_FORWARD_BATCH &&
        (count === 0 || bytes + this.waiting[count]!.bytes <= FORWARD_BATCH_BYTES)
      )
        bytes += this.waiting[count++]!.bytes;
      const jobs = this.waiting.splice(0, count);
      this.inFlight++;
      void this.send(jobs)
        .catch((err: unknown) => jobs.forEach((job) => job.settle(Promise.reject(err)))) // (a job settled already stays so)
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }
}

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
class SlotBlocks implements DailyQuota {
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

/** The time left to `deadline`, as the holder takes it (absent: no deadline). */
function withdrawAfter(deadline: number | null): { withdraw_after_ms?: number } {
  return deadline === null
    ? {}
    : { withdraw_after_ms: Math.min(MAX_WITHDRAW_AFTER_MS, Math.max(0, deadline - Date.now())) };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
