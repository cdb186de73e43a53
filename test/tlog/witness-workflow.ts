/**
 * A hub's witness workflow (`witness/<queue>/<name>`) as the tlog tests watch it: waits until it completed, and
 * asserts it retired because the witness left the hub's configuration (TLOG_WITNESSES and the peer registry).
 */
import type { WorkflowHandle } from '@temporalio/client';
import { eventually } from '../support/service';

export async function expectWitnessRetired(handle: WorkflowHandle, witnessName: string, what: string): Promise<void> {
  const ended = await eventually(
    async () => {
      const d = await handle.describe();
      return d.status.name === 'COMPLETED' ? d : undefined;
    },
    30_000,
    what
  );
  expect(ended.searchAttributes.WitnessState).toEqual(['retired']);
  expect(await handle.result()).toMatchObject({
    name: witnessName,
    state: 'retired',
    reason: `${witnessName} is no longer a witness of this log (TLOG_WITNESSES, peers)`
  });
}
