/**
 * Drives a running hub's A2A interface with the JavaScript A2A SDK (@a2a-js/sdk), as an A2A client would, and prints
 * what it saw as one JSON object (test/api/agent-card-a2a.test.ts asserts on it):
 *   node --import tsx scripts/ci/check-agent-card.ts <base url>
 * A separate process because the SDK's CommonJS build requires jose, which is ESM only: Node loads it, jest's module
 * runtime does not.
 */
import { ClientFactory, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';

const base = process.argv[2];
if (!base) throw new Error('usage: check-agent-card.ts <base url>');

/** The SDK error's class name (a typed protocol error), or the message of anything else. */
async function outcome(call: () => Promise<unknown> | unknown): Promise<{ ok: true; value: unknown } | { ok: false; error: string; message: string }> {
  try {
    return { ok: true, value: await call() };
  } catch (err) {
    return { ok: false, error: (err as Error).name, message: (err as Error).message };
  }
}

const text = (value: string) => ({ content: { $case: 'text' as const, value } });

async function main(): Promise<void> {
  const resolver = new DefaultAgentCardResolver();
  const card = await resolver.resolve(base!, '/.well-known/agent-card.json');
  const specCard = await resolver.resolve(base!, '/a2a/.well-known/agent.json');
  const client = await new ClientFactory().createFromUrl(base!);
  const message = (id: string) => ({ message: { messageId: id, role: Role.ROLE_USER, parts: [text('what do you serve?')] } });
  const streamed = await outcome(async () => {
    const events = [];
    for await (const event of client.sendMessageStream(message('m-2') as never)) events.push(event);
    return events;
  });
  const report = {
    card,
    same_card_at_both_paths: JSON.stringify(card) === JSON.stringify(specCard),
    send_message: await outcome(() => client.sendMessage(message('m-1') as never)),
    send_message_stream: streamed,
    get_task: await outcome(() => client.getTask({ id: 'no-such-task' } as never)),
    cancel_task: await outcome(() => client.cancelTask({ id: 'no-such-task' } as never)),
    list_tasks: await outcome(() => client.listTasks({} as never)),
    get_push_config: await outcome(() => client.getTaskPushNotificationConfig({ taskId: 't', id: 'c' } as never))
  };
  process.stdout.write(JSON.stringify(report, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
