/**
 * The commercial gateway's decision (POST /api/v1/decision): three-dimension scoring (core/commercial/decision.ts)
 * and, when asked, the decision appended to the ledger as a truth of type `decision` by a registered DID, counted
 * against that DID's daily truth quota (TRUTH_DAILY_QUOTA) like any truth write.
 */
import { secondsUntilUtcMidnight } from '../../core/utc-day';
import { randomBytes } from 'node:crypto';
import type { LedgerConfig } from '../../core/config.node';
import { DECISION_WEIGHTS, scoreOptions } from '../../core/commercial/decision';
import { AppError, unauthorized } from '../../core/errors';
import type { CredentialStore } from '../../store/credentials';
import type { Ledger } from '../../store/ledger/ledger';
import type { DailyQuota } from '../../store/ledger/daily-quota';

export interface DecisionDeps {
  ledger: Ledger;
  quota: DailyQuota;
  credentials: CredentialStore;
  config: Pick<LedgerConfig, 'TRUTH_DAILY_QUOTA'>;
}

export function createDecisions({ ledger, quota, credentials, config }: DecisionDeps) {
  /** Scores `options`; with `record`, appends the decision for the DID the caller named in X-DID. */
  async function decide(options: Parameters<typeof scoreOptions>[0], record: boolean, did: unknown) {
    const { decision, recommended } = scoreOptions(options);
    const weights = {
      benefit: DECISION_WEIGHTS.benefit / 100,
      risk: DECISION_WEIGHTS.risk / 100,
      cost: DECISION_WEIGHTS.cost / 100
    };
    if (!record) return { ok: true as const, decision, recommended, weights, recorded: null };

    if (typeof did !== 'string' || did.length === 0)
      throw unauthorized('record: true needs the X-DID header of a registered DID');
    if (!(await credentials.activeDid(did))) throw unauthorized('X-DID is not a registered DID');
    const day = new Date().toISOString().slice(0, 10);
    const scope = `truth:${did}`;
    const allowance = await quota.consume(scope, day, config.TRUTH_DAILY_QUOTA);
    if (!allowance.allowed)
      throw new AppError(
        'quota_exceeded',
        `Daily quota of ${config.TRUTH_DAILY_QUOTA} truth writes for ${did} is used up`,
        { limit: config.TRUTH_DAILY_QUOTA },
        { 'Retry-After': String(secondsUntilUtcMidnight()) }
      );
    const key = `commercial.decision.${new Date().toISOString().replace(/[-:.]/g, '')}-${randomBytes(4).toString('hex')}`;
    // A failed append may still have landed, so its slot stays spent (never a use beyond the quota).
    const appended = await ledger.append({
      kind: 'truth',
      key,
      value: { options, decision, recommended, weights },
      truth_type: 'decision',
      did
    });
    return {
      ok: true as const,
      decision,
      recommended,
      weights,
      recorded: { key, seq: appended.entry.seq, event_id: appended.entry.event_id }
    };
  }

  return { decide };
}
