/**
 * `npm run tasks:recount [-- --fold]`: rebuilds what the task reads keep beside the tasks (store/federation/
 * task-lists.ts, task-counters.ts) from the tasks themselves: lists every task missing from its submitter's list
 * and sets the queue's counters to the tasks' figures. Run it after a process died between a task's write and its
 * counter write, or after tasks were changed by hand; an upgrade needs nothing (the service builds them for the
 * tasks stored before: store/federation/task-reads-build.ts; this runs that build first if it has not). It reads every
 * task and every list (19.8 s at 20,000 tasks on the embedded store of a 2-core machine). Exact when no task changes during the run (stop the queue's traffic, or run it
 * twice). `--fold` also replaces the counter documents of every process that ever ran by one; only with every API
 * and worker process stopped. Connects as the service does (MONGODB_URI, or the embedded FerretDB).
 */
import { loadConfig, mongoUri } from '../core/config.node';
import { connectMongo, ensureIndexes } from '../store/mongo';
import { TaskStore } from '../store/federation/tasks';

async function main(): Promise<void> {
  const config = loadConfig();
  const fold = process.argv.slice(2).includes('--fold');
  const mongo = await connectMongo({ uri: mongoUri(config), dbName: config.MONGODB_DB, appName: 'tasks-recount' });
  try {
    await ensureIndexes(mongo.db);
    const out = await new TaskStore(mongo.db).recount({ fold });
    process.stdout.write(`${JSON.stringify({ ok: true, fold, ...out }, null, 2)}\n`);
  } finally {
    await mongo.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
