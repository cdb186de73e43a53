/**
 * A real Temporal cluster on this machine (docs/operations.md#a-real-temporal-cluster): the Temporal server built from
 * the Go module proxy (scripts/install-tools.sh temporal-server), its schema set up on PostgreSQL by temporal-sql-tool,
 * MEMBERS members each running every service, joined by ringpop membership, and the `default` namespace registered.
 *   node --import tsx scripts/temporal-cluster.ts [--postgres host:port] [--user name] [--password text]
 *                                                [--members 2] [--data-dir dir] [--ui-port 8233]
 * Without --postgres it starts the launcher's own PostgreSQL (scripts/stack/postgres.ts, its cluster under
 * <data dir>/postgres, role `ferret`). Members take 127.0.0.11, 127.0.0.12, … (each its own loopback address, every
 * service on the same ports), so point the hub at any of them: TEMPORAL_ADDRESS=127.0.0.11:7233. On separate hosts
 * each member is started with its host's address instead (test/topology/temporal-cluster.test.ts does so, with a
 * gRPC balancer in front). With --ui-port (0: none) Temporal's Web UI server (scripts/install-tools.sh temporal-ui)
 * serves the UI on 127.0.0.1 pointed at the first member. Ctrl-C stops the UI, the members, then PostgreSQL.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { POSTGRES_ROLE, startPostgres } from './stack/postgres';
import { log, ServerHandle } from './stack/process';
import {
  ensureTemporalServer,
  ensureTemporalUi,
  PostgresAddress,
  registerNamespace,
  setupTemporalSchema,
  startTemporalMember,
  startTemporalUi,
  TemporalMember,
  waitForFrontend
} from './stack/temporal-cluster';
import { ensureTool } from './stack/tools';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      postgres: { type: 'string' },
      user: { type: 'string', default: POSTGRES_ROLE },
      password: { type: 'string', default: '' },
      members: { type: 'string', default: '2' },
      'data-dir': { type: 'string', default: path.resolve('data', 'temporal-cluster') },
      'ui-port': { type: 'string', default: '0' }
    }
  });
  const dataDir = path.resolve(values['data-dir']!);
  const count = Number(values.members);
  if (!Number.isInteger(count) || count < 1 || count > 9) throw new Error('--members: 1 to 9');
  fs.mkdirSync(dataDir, { recursive: true });
  const uiPort = Number(values['ui-port']);
  const [tools, cli, ui] = await Promise.all([
    ensureTemporalServer(),
    ensureTool('temporal'),
    uiPort ? ensureTemporalUi() : Promise.resolve(null)
  ]);

  const parts: ServerHandle[] = [];
  let pg: PostgresAddress;
  if (values.postgres) {
    const [host, port] = values.postgres.split(':');
    pg = { host: host!, port: Number(port ?? 5432), user: values.user!, password: values.password };
  } else {
    log(`starting PostgreSQL (cluster in ${path.join(dataDir, 'postgres')})`);
    const postgres = await startPostgres({ dataDir, echo: true });
    parts.push(postgres);
    pg = { host: '127.0.0.1', port: postgres.port, user: POSTGRES_ROLE };
  }
  const stopAll = async (code: number) => {
    for (const part of [...parts].reverse()) await part.stop();
    process.exit(code);
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stopAll(0));
  try {
    log(`setting up the schemas on ${pg.host}:${pg.port} (temporal, temporal_visibility)`);
    await setupTemporalSchema(tools.sqlTool, pg);
    const members: TemporalMember[] = [];
    for (let i = 1; i <= count; i++) {
      const member = startTemporalMember({
        server: tools.server,
        dir: path.join(dataDir, `member-${i}`),
        ip: `127.0.0.${10 + i}`,
        postgres: pg,
        name: `temporal-${i}`
      });
      members.push(member);
      // Before PostgreSQL, in the stop order.
      parts.splice(values.postgres ? parts.length : 1, 0, member);
      // One at a time: on a new database each member saves the cluster's metadata at its first start, and of two
      // starting at once one can lose that insert and exit.
      await waitForFrontend(cli, member.address, 120_000, member);
    }
    await registerNamespace(
      cli,
      members.map((m) => m.address),
      'default'
    );
    if (ui) {
      const handle = await startTemporalUi({
        binary: ui,
        dir: path.join(dataDir, 'ui'),
        temporalAddress: members[0]!.address,
        host: '127.0.0.1',
        port: uiPort
      });
      parts.push(handle);
      log(`  Web UI ${handle.url} (on ${members[0]!.address})`);
    }
    log(`Temporal cluster of ${count} serving: ${members.map((m) => m.address).join(', ')} (namespace default)`);
    log(`  the hub: TEMPORAL_ADDRESS=${members[0]!.address}; its worker registers the search attributes at start`);
    log(`  cluster: ${cli} operator cluster describe --address ${members[0]!.address}`);
    log('Press Ctrl-C to stop.');
  } catch (err) {
    log(`start failed: ${err instanceof Error ? err.message : String(err)}`);
    await stopAll(1);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
