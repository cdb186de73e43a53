/**
 * daemon-breaker/<queue>: the daemon's circuit breaker as durable state (contract: breaker.contract.ts). Requests
 * arrive as signals and are handled one at a time by the main loop; answers go back to the asking daemon-dag
 * workflow as signals. Each state change sets the BreakerState search attribute and appends a `breaker` line to the
 * audit chain. Continues as new when the history grows, carrying its state (waiting tasks included).
 */
import {
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  proxyActivities,
  setDefaultSignalHandler,
  setHandler,
  upsertSearchAttributes,
  workflowInfo
} from '@temporalio/workflow';
import type { DaemonCoreActivities } from '../../activities/daemon';
import { BreakerStateAttr } from '../../core/search-attributes';
import {
  BreakerAnswer,
  BreakerInput,
  BreakerReport,
  BreakerRequester,
  BreakerSnapshot,
  BreakerStateName,
  BreakerView,
  breakerAdmitSignal,
  breakerAnswerSignal,
  breakerReportSignal,
  breakerResetSignal,
  breakerStateQuery
} from '../../contracts/daemon/breaker.contract';

const { appendDaemonAudit } = proxyActivities<DaemonCoreActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' }
});

type Message =
  | { kind: 'admit'; who: BreakerRequester }
  | { kind: 'report'; report: BreakerReport }
  | { kind: 'reset'; actor: string };

const HISTORY_LIMIT = 2000;

export async function daemonBreakerWorkflow(input: BreakerInput): Promise<void> {
  const s: BreakerSnapshot = input.carried ?? {
    state: 'closed',
    consecutive_failures: 0,
    opened_at: null,
    probe: null,
    waiting: [],
    changes: 0
  };
  const inbox: Message[] = [];
  // One handler for the three signals: signals buffered before the first task are then taken in the order they
  // were sent (a handler per signal would drain its own kind first, e.g. admissions before a failure report).
  setDefaultSignalHandler((name, ...args) => {
    if (name === breakerAdmitSignal.name) inbox.push({ kind: 'admit', who: args[0] as BreakerRequester });
    else if (name === breakerReportSignal.name) inbox.push({ kind: 'report', report: args[0] as BreakerReport });
    else if (name === breakerResetSignal.name)
      inbox.push({ kind: 'reset', actor: (args[0] as { actor?: string } | undefined)?.actor ?? 'operator' });
  });
  setHandler(breakerStateQuery, (): BreakerView => ({
    ...s,
    waiting: [...s.waiting],
    threshold: input.threshold,
    cooldown_ms: input.cooldown_ms,
    half_open_at:
      s.state === 'open' && s.opened_at !== null ? new Date(s.opened_at + input.cooldown_ms).toISOString() : null
  }));

  const answer = async (who: BreakerRequester, a: Omit<BreakerAnswer, 'task_id' | 'state'>) => {
    // A DAG that is gone cannot be answered; nothing else depends on it.
    await getExternalWorkflowHandle(who.workflow_id)
      .signal(breakerAnswerSignal, { task_id: who.task_id, state: s.state, ...a })
      .catch(() => undefined);
  };

  const moveTo = async (to: BreakerStateName, reason: string) => {
    const from = s.state;
    s.state = to;
    s.changes++;
    if (to === 'open') s.opened_at = Date.now();
    if (to === 'closed') {
      s.consecutive_failures = 0;
      s.opened_at = null;
    }
    if (to !== 'half_open') s.probe = null;
    upsertSearchAttributes([{ key: BreakerStateAttr, value: to }]);
    await appendDaemonAudit({
      event: 'breaker',
      from,
      to,
      reason,
      consecutive_failures: s.consecutive_failures,
      breaker: workflowInfo().workflowId
    });
    if (to === 'closed') {
      const released = s.waiting.splice(0);
      for (const who of released) await answer(who, { allowed: true, probe: false });
    }
    if (to === 'half_open') await pickProbe();
  };

  const pickProbe = async () => {
    if (s.state !== 'half_open' || s.probe) return;
    const next = s.waiting.shift();
    if (!next) return;
    s.probe = next;
    await answer(next, { allowed: true, probe: true });
  };

  const isProbe = (r: BreakerRequester) =>
    s.probe !== null && s.probe.workflow_id === r.workflow_id && s.probe.task_id === r.task_id;

  if (!input.carried) upsertSearchAttributes([{ key: BreakerStateAttr, value: 'closed' }]);
  for (;;) {
    const cooldownLeft =
      s.state === 'open' && s.opened_at !== null ? Math.max(0, s.opened_at + input.cooldown_ms - Date.now()) : null;
    const woke =
      cooldownLeft === null
        ? (await condition(() => inbox.length > 0), true)
        : await condition(() => inbox.length > 0, cooldownLeft);
    if (!woke) {
      await moveTo('half_open', `cool-down of ${input.cooldown_ms} ms elapsed`);
      continue;
    }
    const m = inbox.shift()!;
    if (m.kind === 'admit') {
      if (s.state === 'closed') await answer(m.who, { allowed: true, probe: false });
      else if (s.state === 'half_open' && !s.probe) {
        s.probe = m.who;
        await answer(m.who, { allowed: true, probe: true });
      } else {
        s.waiting.push(m.who);
        await answer(m.who, { allowed: false, probe: false });
      }
    } else if (m.kind === 'report') {
      const r = m.report;
      if (isProbe(r)) {
        if (r.ok === true) await moveTo('closed', `probe ${r.workflow_id} ${r.task_id} succeeded`);
        else if (r.ok === false) await moveTo('open', `probe ${r.workflow_id} ${r.task_id} failed`);
        else {
          s.probe = null;
          await pickProbe();
        }
      } else if (s.state === 'closed' && r.ok === true) s.consecutive_failures = 0;
      else if (s.state === 'closed' && r.ok === false) {
        s.consecutive_failures++;
        if (s.consecutive_failures >= input.threshold)
          await moveTo('open', `${s.consecutive_failures} consecutive failed model calls`);
      }
    } else {
      await moveTo('closed', `reset by ${m.actor}`);
    }
    if (
      inbox.length === 0 &&
      (workflowInfo().historyLength > (input.history_limit ?? HISTORY_LIMIT) || workflowInfo().continueAsNewSuggested)
    ) {
      return continueAsNew<typeof daemonBreakerWorkflow>({ ...input, carried: s });
    }
  }
}
