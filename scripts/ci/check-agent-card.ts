/**
 * Drives a running hub's A2A interface with the JavaScript A2A SDK (@a2a-js/sdk), as an A2A client would, and prints
 * what it saw as one JSON object (test/api/agent-card-a2a.test.ts asserts on it):
 *   A2A_HEADERS='{"x-external-node":"…","x-external-key":"…"}' node --import tsx scripts/ci/check-agent-card.ts <base url>
 * The SDK is used as shipped; the caller's credentials go on its fetch. One task is streamed to its end (a worker
 * node, simulated by the test meanwhile, claims tasks needing `summarize` and completes them); one names a capability
 * no node declared, so it stays SUBMITTED until it is canceled. The card's JSON-RPC interface runs the same life
 * (`jsonrpc` in the report) through the SDK's JSON-RPC transport.
 * A separate process because the SDK's CommonJS build requires jose, which is ESM only: Node loads it, jest's module
 * runtime does not.
 */
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory
} from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';

const base = process.argv[2];
if (!base) throw new Error('usage: check-agent-card.ts <base url>');
const headers: Record<string, string> = JSON.parse(process.env.A2A_HEADERS ?? '{}');

/** The SDK error's class name (a typed protocol error), or the message of anything else. */
async function outcome(
  call: () => Promise<unknown> | unknown
): Promise<
  { ok: true; value: unknown } | { ok: false; error: string; message: string; transport?: string; code?: number }
> {
  try {
    return { ok: true, value: await call() };
  } catch (err) {
    // The JSON-RPC transport's errors also say so, with the JSON-RPC error code.
    const { transport, envelopeCode } = err as { transport?: string; envelopeCode?: number };
    return {
      ok: false,
      error: (err as Error).name,
      message: (err as Error).message,
      ...(transport ? { transport, code: envelopeCode } : {})
    };
  }
}

const text = (value: string) => ({ content: { $case: 'text' as const, value } });

const withCredentials: typeof fetch = (input, init) =>
  fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers } });

/** The same operations through the card's JSON-RPC interface (the SDK's JSON-RPC transport only). */
async function overJsonRpc(): Promise<Record<string, unknown>> {
  const only = (fetchImpl: typeof fetch) =>
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      preferredTransports: ['JSONRPC']
    });
  const client = await new ClientFactory(only(withCredentials)).createFromUrl(base!);
  const polling = await new ClientFactory({ ...only(withCredentials), clientConfig: { polling: true } }).createFromUrl(
    base!
  );
  const message = (id: string, capabilities: string[]) => ({
    message: {
      messageId: id,
      role: Role.ROLE_USER,
      parts: [text(`please summarise (${id})`)],
      metadata: { required_capabilities: capabilities }
    }
  });
  const sent = await outcome(() =>
    polling.sendMessage(message(`rpc-held-${Date.now()}`, ['nobody-declares-this']) as never)
  );
  const streamed = await outcome(async () => {
    const events = [];
    for await (const event of client.sendMessageStream(message(`rpc-streamed-${Date.now()}`, ['summarize']) as never))
      events.push(event);
    return events;
  });
  const heldId = sent.ok ? (sent.value as { id: string }).id : 'none';
  return {
    send_message: sent,
    send_message_stream: streamed,
    get_held: await outcome(() => client.getTask({ id: heldId } as never)),
    list_tasks: await outcome(() => client.listTasks({ pageSize: 10 } as never)),
    cancel_held: await outcome(() => client.cancelTask({ id: heldId } as never)),
    cancel_again: await outcome(() => client.cancelTask({ id: heldId } as never)),
    get_unknown: await outcome(() => client.getTask({ id: 'no-such-task' } as never)),
    unsupported: await outcome(() =>
      client.sendMessage({ message: { ...message(`rpc-turn-${Date.now()}`, []).message, taskId: heldId } } as never)
    ),
    get_push_config: await outcome(() => client.getTaskPushNotificationConfig({ taskId: 't', id: 'c' } as never))
  };
}

async function main(): Promise<void> {
  const resolver = new DefaultAgentCardResolver();
  const card = await resolver.resolve(base!, '/.well-known/agent-card.json');
  const specCard = await resolver.resolve(base!, '/a2a/.well-known/agent.json');
  const options = (fetchImpl: typeof fetch) =>
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new RestTransportFactory({ fetchImpl })]
    });
  const client = await new ClientFactory(options(withCredentials)).createFromUrl(base!);
  // polling: SendMessage returns at once (returnImmediately) for the task no node will take.
  const polling = await new ClientFactory({
    ...options(withCredentials),
    clientConfig: { polling: true }
  }).createFromUrl(base!);
  const anonymous = await new ClientFactory(options(fetch)).createFromUrl(base!);
  const message = (id: string, capabilities: string[]) => ({
    message: {
      messageId: id,
      role: Role.ROLE_USER,
      parts: [text(`please summarise (${id})`)],
      metadata: { required_capabilities: capabilities }
    }
  });

  const sent = await outcome(() =>
    polling.sendMessage(message(`held-${Date.now()}`, ['nobody-declares-this']) as never)
  );
  const streamed = await outcome(async () => {
    const events = [];
    for await (const event of client.sendMessageStream(message(`streamed-${Date.now()}`, ['summarize']) as never))
      events.push(event);
    return events;
  });
  const heldId = sent.ok ? (sent.value as { id: string }).id : 'none';
  const first = streamed.ok
    ? (streamed.value as Array<{ payload?: { $case: string; value: { id?: string } } }>)[0]
    : undefined;
  const streamedId = first?.payload?.$case === 'task' ? (first.payload.value.id ?? 'none') : 'none';
  const report = {
    card,
    same_card_at_both_paths: JSON.stringify(card) === JSON.stringify(specCard),
    anonymous_send: await outcome(() => anonymous.sendMessage(message('anon', ['nobody-declares-this']) as never)),
    send_message: sent,
    send_message_stream: streamed,
    get_streamed: await outcome(() => client.getTask({ id: streamedId } as never)),
    get_held: await outcome(() => client.getTask({ id: heldId } as never)),
    list_tasks: await outcome(() => client.listTasks({ pageSize: 10 } as never)),
    cancel_held: await outcome(() => client.cancelTask({ id: heldId } as never)),
    cancel_again: await outcome(() => client.cancelTask({ id: heldId } as never)),
    get_unknown: await outcome(() => client.getTask({ id: 'no-such-task' } as never)),
    get_push_config: await outcome(() => client.getTaskPushNotificationConfig({ taskId: 't', id: 'c' } as never)),
    jsonrpc: await overJsonRpc()
  };
  process.stdout.write(
    JSON.stringify(report, (_k, v: unknown) =>
      typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v
    )
  );
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
