/**
 * witness/<core queue>/<witness name>: collects one witness's cosignatures on this hub's checkpoints (contract:
 * contracts/tlog/witness.contract.ts). Loop: one submission (activity submitToWitness: the newest signed checkpoint,
 * with the consistency proof from what the witness cosigned last, its cosignature verified and stored), then sleep
 * on a durable timer: until a `configure` signal (the API signed a checkpoint, or the settings changed) or poll_ms
 * when the witness cosigned or had nothing new; after a failed submission (unreachable, or refused) for a backoff
 * doubling from backoff_ms to max_backoff_ms, which new checkpoints do not cut short (a witness that is down is not
 * hammered at the rate checkpoints are signed) but new settings do. So a witness that comes back is caught up
 * within the backoff, with no operator. The search attributes WitnessState and WitnessCosignedSize follow each
 * round. Continue-as-new bounds the history. The `retire` signal (the witness was removed from the configuration) ends
 * it after the round under way: state `retired`, the status as its result.
 */
import {
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo
} from '@temporalio/workflow';
import type { Activities } from '../../activities';
import {
  TlogWitnessInput,
  TlogWitnessSettings,
  TlogWitnessStatus,
  tlogWitnessStatusQuery,
  witnessConfigureSignal,
  witnessRetireSignal
} from '../../contracts/tlog/witness.contract';
import { WitnessCosignedSizeAttr, WitnessStateAttr } from '../../core/search-attributes';

// Only this hub's own failures (MongoDB) throw: retried with backoff until it is back.
const { submitToWitness } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

const sameSettings = (x: TlogWitnessSettings, y: TlogWitnessSettings) =>
  x.origin === y.origin && x.name === y.name && x.verifier_key === y.verifier_key && x.url === y.url;

export async function tlogWitnessWorkflow(input: TlogWitnessInput): Promise<TlogWitnessStatus> {
  let settings: TlogWitnessSettings = {
    origin: input.origin,
    name: input.name,
    verifier_key: input.verifier_key,
    url: input.url
  };
  const status: TlogWitnessStatus = {
    ...settings,
    state: input.carried?.state ?? 'pending',
    cosigned_size: input.carried?.cosigned_size ?? 0,
    hub_size: 0,
    reason: null,
    rounds: input.carried?.rounds ?? 0,
    cosigned: input.carried?.cosigned ?? 0,
    failures: input.carried?.failures ?? 0,
    runs: input.carried?.runs ?? 0,
    next_round_at: null
  };
  let signalled = false;
  let reconfigured = false;
  let retiredFor: string | null = null;
  setHandler(tlogWitnessStatusQuery, () => status);
  setHandler(witnessRetireSignal, ({ reason }) => {
    retiredFor = reason;
  });
  setHandler(witnessConfigureSignal, (next) => {
    signalled = true;
    if (next.name !== settings.name || sameSettings(next, settings)) return;
    settings = { origin: next.origin, name: next.name, verifier_key: next.verifier_key, url: next.url };
    Object.assign(status, settings);
    reconfigured = true;
  });
  // The search attributes go with a continued run: shown already when carried.
  let shown: { state: string; size: number } | null = input.carried?.state
    ? { state: input.carried.state, size: input.carried.cosigned_size ?? 0 }
    : null;

  for (;;) {
    if (retiredFor !== null) {
      status.state = 'retired';
      status.reason = retiredFor;
      status.next_round_at = null;
      upsertSearchAttributes([{ key: WitnessStateAttr, value: ['retired'] }]);
      return status;
    }
    if (workflowInfo().historyLength >= input.history_limit || workflowInfo().continueAsNewSuggested) {
      const { rounds, cosigned, failures, runs, state, cosigned_size } = status;
      return continueAsNew<typeof tlogWitnessWorkflow>({
        ...input,
        ...settings,
        carried: { rounds, cosigned, failures, runs: runs + 1, state, cosigned_size }
      });
    }
    signalled = false;
    reconfigured = false;
    const round = await submitToWitness(settings);
    status.rounds += 1;
    status.hub_size = round.hub_size;
    status.cosigned_size = round.cosigned_size;
    status.reason = round.reason;
    if (round.outcome === 'cosigned') status.cosigned += 1;
    if (round.outcome === 'unreachable' || round.outcome === 'refused') {
      status.state = round.outcome;
      status.failures += 1;
    } else {
      status.state = round.cosigned_size > 0 || round.outcome === 'cosigned' ? 'cosigned' : 'pending';
      status.failures = 0;
    }
    if (!shown || shown.state !== status.state || shown.size !== status.cosigned_size) {
      upsertSearchAttributes([
        { key: WitnessStateAttr, value: [status.state] },
        { key: WitnessCosignedSizeAttr, value: status.cosigned_size }
      ]);
      shown = { state: status.state, size: status.cosigned_size };
    }
    const wait =
      status.failures > 0
        ? Math.min(input.max_backoff_ms, input.backoff_ms * 2 ** Math.min(status.failures - 1, 20))
        : round.outcome === 'cosigned'
          ? 0
          : input.poll_ms;
    status.next_round_at = new Date(Date.now() + wait).toISOString();
    if (wait > 0) await condition(() => retiredFor !== null || (status.failures > 0 ? reconfigured : signalled), wait);
  }
}
