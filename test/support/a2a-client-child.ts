/**
 * An A2A client (@a2a-js/sdk, as shipped, over the card's HTTP+JSON interface) for the node SDK tests, which hand
 * their nodes work the way an A2A client does. Run in a process of its own (the SDK's CommonJS build requires jose,
 * which is ESM only: Node loads it, jest's module runtime does not); prints one JSON value.
 *   A2A_HEADERS='{"x-zr-token":"…"}' node --import tsx a2a-client-child.ts <base url> send '<json list>'
 *     each item { messageId, taskType, capabilities, data }: SendMessage with returnImmediately, the data as a data
 *     part and the task type and capabilities in the message's metadata; prints the task ids in order.
 *   A2A_HEADERS=… node --import tsx a2a-client-child.ts <base url> get '<json list of task ids>'
 *     GetTask each; prints [{ id, context_id, state (TASK_STATE_…), artifacts: [each data part's value], texts:
 *     [each artifact's text parts, joined], message: the status message's text or null }].
 *   A2A_HEADERS=… node --import tsx a2a-client-child.ts <base url> reply '{ taskId, contextId, messageId, text }'
 *     SendMessage of a text answer to a task waiting for input (multi-turn); prints the task's id.
 * test/support/a2a-client.ts runs it.
 */
import { ClientFactory, ClientFactoryOptions, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base, command, argument] = process.argv.slice(2);
if (!base || !command || !argument) throw new Error('usage: a2a-client-child.ts <base url> send|get <json>');
const headers: Record<string, string> = JSON.parse(process.env.A2A_HEADERS ?? '{}');
const withCredentials: typeof fetch = (input, init) =>
  fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers } });

type PartLike = { content?: { $case: string; value: unknown } };

async function main(): Promise<unknown> {
  const client = await new ClientFactory({
    ...ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new RestTransportFactory({ fetchImpl: withCredentials })]
    }),
    clientConfig: { polling: true }
  }).createFromUrl(base!);
  if (command === 'send') {
    const items = JSON.parse(argument!) as Array<{
      messageId: string;
      taskType: string;
      capabilities: string[];
      data: Record<string, unknown>;
    }>;
    const ids: string[] = [];
    for (const item of items) {
      const task = (await client.sendMessage({
        message: {
          messageId: item.messageId,
          role: Role.ROLE_USER,
          parts: [{ content: { $case: 'data', value: item.data } }],
          metadata: { task_type: item.taskType, required_capabilities: item.capabilities }
        }
      } as never)) as { id?: string };
      if (!task.id) throw new Error(`SendMessage answered no task: ${JSON.stringify(task)}`);
      ids.push(task.id);
    }
    return ids;
  }
  if (command === 'reply') {
    const item = JSON.parse(argument!) as { taskId: string; contextId: string; messageId: string; text: string };
    const answer = (await client.sendMessage({
      message: {
        messageId: item.messageId,
        taskId: item.taskId,
        contextId: item.contextId,
        role: Role.ROLE_USER,
        parts: [{ content: { $case: 'text', value: item.text } }]
      }
    } as never)) as { id?: string };
    return answer.id ?? null;
  }
  if (command === 'get') {
    const out = [];
    for (const id of JSON.parse(argument!) as string[]) {
      const task = (await client.getTask({ id } as never)) as {
        id: string;
        contextId?: string;
        status?: { state?: unknown; message?: { parts?: PartLike[] } };
        artifacts?: Array<{ parts?: PartLike[] }>;
      };
      const texts = (parts: PartLike[] = []) =>
        parts.filter((p) => p.content?.$case === 'text').map((p) => p.content!.value as string);
      out.push({
        id: task.id,
        context_id: task.contextId ?? null,
        state: typeof task.status?.state === 'number' ? TaskState[task.status.state] : task.status?.state,
        artifacts: (task.artifacts ?? []).flatMap((a) =>
          (a.parts ?? []).filter((p) => p.content?.$case === 'data').map((p) => p.content!.value)
        ),
        texts: (task.artifacts ?? []).map((a) => texts(a.parts).join('')).filter((t) => t !== ''),
        message: texts(task.status?.message?.parts).join('') || null
      });
    }
    return out;
  }
  throw new Error(`unknown command ${command}`);
}

main().then(
  (out) => process.stdout.write(`${JSON.stringify(out)}\n`),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  }
);
