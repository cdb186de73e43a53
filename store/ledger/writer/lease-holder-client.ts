/**
 * A replica's side of the writer lease (store/ledger/writer/lease.ts): its appends and its daily-quota claims go
 * over HTTP to the replica holding the lease, with `Authorization: Bearer <LEDGER_FORWARD_SECRET>`
 * (api/routes/ledger/writer.ts; the shapes in core/ledger/forwarded-writes.ts). One process then appends and counts
 * for every replica, as the cluster primary does for the processes of one host (writer/cluster-primary.ts): apart, two
 * replicas writing one DID claimed the same quota slots, refused each other's inserts and re-read the DID's slots
 * of the day after every few refusals (bench:ledger, one DID at concurrency 16, FerretDB at a full core).
 * A truth write's slot goes with its append (`forwardCounted`, POST /internal/ledger/counted-append-batches: the
 * writes waiting while two requests are on their way go together in the next; /internal/ledger/counted-appends, one
 * per request, to a holder without the batch route); other claims take slots a block at a time (lease-holder-quota.ts).
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
 *     A request left unanswered for 1.5 s has the holder probed on a connection of its own; one that cannot connect
 *     has the holder skipped and the requests on their way given up at once (writer/holder-watch.ts), so a holder cut
 *     off by the network costs the writes in flight, not every write until their deadlines.
 */
import { Agent, errors as undiciErrors, request } from 'undici';
import type { z } from 'zod';
import { AppError } from '../../../core/errors';
import { canonicalJson } from '../../../core/ledger/canonical-json';
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
} from '../../../core/ledger/forwarded-writes';
import {
  AppendInput,
  AppendResult,
  AppendWithdrawn,
  ForwardAppend,
  ForwardCountedAppend,
  ForwardNotDelivered,
  QuotaClaim
} from '../append';
import type { DailyQuota } from '../daily-quota';
import { HolderWatch } from './holder-watch';
import { SlotBlocks } from './lease-holder-quota';
import type { LedgerWriterLease } from './lease';

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

/**
 * Errors raised before the request could have reached the holder: the codes above, or any failure of the connect
 * itself (a blackhole route answers EINVAL, a prohibit route EACCES).
 */
function notDelivered(err: unknown): boolean {
  if (err instanceof undiciErrors.ConnectTimeoutError) return true;
  type SocketError = { code?: unknown; syscall?: unknown; cause?: { code?: unknown; syscall?: unknown } };
  const { code, syscall, cause } = err as SocketError;
  if (syscall === 'connect' || cause?.syscall === 'connect') return true;
  const found = code ?? cause?.code;
  return typeof found === 'string' && NOT_DELIVERED_CODES.has(found);
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
  const watch = new HolderWatch(lease, notDelivered, onError);
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
      ({ status, text } = await watch.during(url, async (signal) => {
        const res = await request(`${url}${path}`, {
          method: 'POST',
          dispatcher: agent,
          signal,
          headers: {
            authorization: `Bearer ${secret}`,
            'content-type': 'application/json',
            accept: 'application/json'
          },
          body: JSON.stringify(body),
          headersTimeout: waitMs,
          bodyTimeout: waitMs
        });
        return { status: res.statusCode, text: await res.body.text() };
      }));
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
      await watch.close();
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
