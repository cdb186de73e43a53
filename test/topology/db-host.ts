/**
 * What runs on the test host `db` (started inside its network namespace by test/topology/): the launcher's own
 * PostgreSQL and FerretDB (scripts/stack/postgres.ts, scripts/stack/ferretdb.ts), as `npm start` runs them, with two
 * differences a host needs: PostgreSQL also listens on the host's address and trusts the hosts' subnet (Temporal's
 * members connect from other hosts), and FerretDB listens on the host's address.
 *   node --import tsx test/topology/db-host.ts <data dir> <host address> <subnet CIDR>
 * Prints one JSON line `{"postgres":5432,"ferretdb":27017}` once both serve; SIGTERM stops FerretDB, then PostgreSQL.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startFerretDb } from '../../scripts/stack/ferretdb';
import { startPostgres } from '../../scripts/stack/postgres';

export const DB_POSTGRES_PORT = 5432;
export const DB_FERRETDB_PORT = 27017;

async function main(): Promise<void> {
  const [dataDir, address, subnet] = process.argv.slice(2);
  if (!dataDir || !address || !subnet) throw new Error('usage: db-host.ts <data dir> <host address> <subnet CIDR>');
  fs.mkdirSync(dataDir, { recursive: true });
  // PostgreSQL runs as the postgres user (we are root): it reads this file, as it reads its cluster under dataDir.
  const hbaFile = path.join(dataDir, 'pg_hba.conf');
  fs.writeFileSync(hbaFile, `host all all 127.0.0.1/32 trust\nhost all all ${subnet} trust\n`, { mode: 0o644 });
  const postgres = await startPostgres({
    dataDir,
    port: DB_POSTGRES_PORT,
    echo: true,
    settings: { listen_addresses: `127.0.0.1,${address}`, hba_file: hbaFile }
  });
  let ferret: Awaited<ReturnType<typeof startFerretDb>>;
  try {
    ferret = await startFerretDb({
      dataDir,
      host: address,
      port: DB_FERRETDB_PORT,
      postgresqlUrl: postgres.url,
      echo: true
    });
  } catch (err) {
    await postgres.stop();
    throw err;
  }
  process.stdout.write(`${JSON.stringify({ postgres: postgres.port, ferretdb: ferret.port })}\n`);
  const stop = async () => {
    await ferret.stop();
    await postgres.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
