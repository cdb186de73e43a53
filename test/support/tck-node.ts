/**
 * The worker node that does the A2A conformance kit's work (a2aproject/a2a-tck, branch 1.0-dev) through the hub's
 * node API: the kit picks each scenario by the prefix of its message's messageId (scenarios/*.feature), and a broker
 * hub hands the message to a node, so this node answers each prefix as the kit's reference agents do. The newest
 * message of the submitter decides (a follow-up answering input-required carries its own prefix).
 *
 *   tck-input-required       input-required (no question)
 *   tck-complete-task        completed, the result's text "Hello from TCK"
 *   tck-artifact-text|file|file-url|data   completed with that artifact first (text, raw base64 "tck" or a url as
 *                            output.txt text/plain, data {"key":"value","count":42})
 *   tck-message-response     a Message as the answer: "Direct message response"
 *   tck-reject-task          failed: rejected
 *   tck-stream-*             working (progress), an artifact sent while working (chunked: two appended chunks),
 *                            then completed
 *   test-resubscribe-message-id   working for 4 s, then completed
 *   anything else            completed ("Unhandled messageId prefix: <id>")
 *
 * Used by test/api/a2a-multiturn.test.ts, and on its own to run the kit against a running hub:
 *   npx tsx test/support/tck-node.ts --hub http://127.0.0.1:3000 --token <homologous token of a review_admin>
 * registers a node, approves it, keeps it beating and works until Ctrl-C (docs/a2a.md#the-conformance-kit).
 */
import { http } from './service';
import { heartbeat, nodeHeaders, registerNode, type RegisteredNode } from './federation';

type Json = Record<string, any>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The messageId of the submitter's newest message: the last user message of the history, else the payload's. */
export function newestUserMessageId(task: Json): string {
  const history: Json[] = Array.isArray(task.history) ? task.history : [];
  const answers = history.filter((m) => m?.role === 'ROLE_USER');
  const newest = answers[answers.length - 1] ?? task.payload?.message;
  return String(newest?.messageId ?? '');
}

const FILE_PART = { filename: 'output.txt', mediaType: 'text/plain' };

/** Works one claimed task as the kit's scenario for its prefix asks. */
export async function workTckTask(hub: string, node: RegisteredNode, task: Json): Promise<void> {
  const id = newestUserMessageId(task);
  const call = (what: string, body: unknown) =>
    http('POST', `${hub}/api/task/${task.task_id}/${what}`, { headers: nodeHeaders(node), body });
  const complete = (body: Json) => call('complete', body);
  const withArtifact = (parts: Json[]) => complete({ artifacts: [{ artifactId: `${task.task_id}-tck`, parts }] });
  if (id.startsWith('tck-input-required')) await call('input-required', {});
  else if (id.startsWith('tck-complete-task')) await complete({ result: { text: 'Hello from TCK' } });
  else if (id.startsWith('tck-artifact-text')) await withArtifact([{ text: 'Generated text content' }]);
  else if (id.startsWith('tck-artifact-file-url'))
    await withArtifact([{ url: 'https://example.com/output.txt', ...FILE_PART }]);
  else if (id.startsWith('tck-artifact-file')) await withArtifact([{ raw: 'dGNr', ...FILE_PART }]);
  else if (id.startsWith('tck-artifact-data')) await withArtifact([{ data: { key: 'value', count: 42 } }]);
  else if (id.startsWith('tck-message-response'))
    await complete({ message: { parts: [{ text: 'Direct message response' }] } });
  else if (id.startsWith('tck-reject-task')) await call('fail', { reason: 'rejected' });
  else if (id.startsWith('tck-stream-')) {
    await call('progress', { note: 'working' });
    await sleep(400);
    const artifactId = `${task.task_id}-stream`;
    if (id.startsWith('tck-stream-artifact-chunked')) {
      await call('artifact', {
        artifact: { artifactId, parts: [{ text: 'chunk-1 ' }] },
        append: true,
        last_chunk: false
      });
      await sleep(400);
      await call('artifact', {
        artifact: { artifactId, parts: [{ text: 'chunk-2' }] },
        append: true,
        last_chunk: true
      });
    } else {
      const text = id.startsWith('tck-stream-ordering')
        ? 'Ordered output'
        : id.startsWith('tck-stream-003')
          ? 'Stream task lifecycle'
          : id.startsWith('tck-stream-artifact-file')
            ? null
            : 'Stream hello from TCK';
      const parts = text === null ? [{ raw: 'dGNr', ...FILE_PART }] : [{ text }];
      await call('artifact', { artifact: { artifactId, parts } });
    }
    await sleep(400);
    await complete({ result: { text: 'Hello from TCK' } });
  } else if (id.startsWith('test-resubscribe-message-id')) {
    await call('progress', { note: 'working' });
    await sleep(4000);
    await complete({ result: { text: 'Hello from TCK' } });
  } else await complete({ result: { text: `Unhandled messageId prefix: ${id}` } });
}

/** Claims and works tasks (those whose required capabilities the node declared) until stopped. */
export function runTckNode(hub: string, node: RegisteredNode): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    let beat = 0;
    while (!stopped) {
      if (Date.now() - beat > 20_000) {
        await heartbeat(hub, node).catch(() => undefined);
        beat = Date.now();
      }
      const claimed = await http('POST', `${hub}/api/task/assign`, {
        headers: nodeHeaders(node),
        body: { max_tasks: 10 }
      }).catch(() => null);
      const tasks: Json[] = claimed?.body?.tasks ?? [];
      // Each task on its own: a long scenario does not hold up the others.
      for (const task of tasks)
        void workTckTask(hub, node, task).catch((err) => console.error(`tck node: ${task.task_id}: ${err}`));
      if (tasks.length === 0) await sleep(150);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    }
  };
}

async function main(): Promise<void> {
  const arg = (name: string) => {
    const at = process.argv.indexOf(`--${name}`);
    return at > 0 ? process.argv[at + 1] : undefined;
  };
  const hub = arg('hub');
  const token = arg('token');
  if (!hub || !token) {
    console.error('usage: tsx test/support/tck-node.ts --hub <hub main URL> --token <homologous token (review_admin)>');
    process.exit(64);
  }
  const node = await registerNode(hub, 'a2a conformance kit node');
  const approved = await http('POST', `${hub}/a2a/review/approve`, {
    headers: { 'x-zr-token': token },
    body: { node_id: node.node_id, reason: 'the conformance kit node' }
  });
  if (approved.status !== 200) console.error(`approve ${node.node_id}: ${approved.status} ${approved.text}`);
  await heartbeat(hub, node);
  console.log(`tck node ${node.node_id} working for ${hub}; Ctrl-C stops it`);
  const running = runTckNode(hub, node);
  process.once('SIGINT', () => void running.stop().then(() => process.exit(0)));
}

if (process.argv[1]?.endsWith('tck-node.ts')) void main();
