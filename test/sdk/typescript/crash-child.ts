/**
 * A node process for the crash test: writes truths as fast as it can and prints the id of each write whose
 * write() returned; the test kills it with SIGKILL mid-stream. Arguments: hub URL, state dir, DID, count.
 */
import { HubNode } from '../../../sdk/typescript/src';

async function main(): Promise<void> {
  const [hubUrl, stateDir, did, count] = process.argv.slice(2) as [string, string, string, string];
  const node = await new HubNode({ hubUrl, stateDir, did, heartbeat: false, verify: false }).start();
  node.on('error', () => undefined);
  for (let i = 0; i < Number(count); i++) {
    const h = node.write({ key: `sdk.kill.${i}`, value: { i } });
    process.stdout.write(`${h.id} ${i}\n`);
    if (i % 5 === 4) await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise(() => undefined); // wait to be killed
}

void main();
