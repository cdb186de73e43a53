/**
 * The PostgreSQL server the embedded FerretDB stores in (docs/storage.md#the-embedded-store-ferretdb-on-postgresql):
 * Debian's `postgresql` package, run as a child server with its cluster under `DATA_DIR/postgres`, listening on
 * loopback TCP only (no Unix socket), trust authentication for the one local role `ferret`. Never a system cluster:
 * the cluster is created here by `initdb` on first start and started with `postgres -D` directly (no pg_ctlcluster).
 *
 * PostgreSQL refuses to run as root: when the launcher is root, the cluster directory belongs to the `postgres`
 * system user (created by the Debian package) and the server and initdb run as that user.
 */
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EX_CONFIG } from '../../core/config-check.node';
import { EX_UNAVAILABLE } from './packages';
import { freePort, isBindFailure, log, ServerHandle, spawnServer, stopStale, waitForPort } from './process';
import { START_ATTEMPTS } from './temporal';

export const POSTGRES_INSTALL_HINT = 'apt-get install -y postgresql (or: bash scripts/install-tools.sh postgresql)';
/**
 * How a server of ours (and a leftover of a launcher killed outright) is stopped: a fast shutdown, whose clients (a
 * leftover FerretDB) are disconnected, not waited for as PostgreSQL's SIGTERM (a smart shutdown) does.
 */
const STOP_SIGNAL = 'SIGINT';
/** The role FerretDB connects as; the database is `postgres`, created by initdb. */
export const POSTGRES_ROLE = 'ferret';

/** Why the launcher does not start the embedded store on this machine or data dir, and the exit code it stops with. */
export class EmbeddedStoreRefused extends Error {
  constructor(
    message: string,
    /** EX_UNAVAILABLE (PostgreSQL is not installed) or EX_CONFIG (the data dir cannot be used). */
    readonly exitCode: number
  ) {
    super(message);
    this.name = 'EmbeddedStoreRefused';
  }
}

/**
 * The data dir's SQLite data (`DATA_DIR/ferretdb/*.sqlite`): FerretDB's former backend, which this version does not
 * read and does not migrate. Without a PostgreSQL cluster beside it the data dir is refused (EmbeddedStoreRefused,
 * EX_CONFIG: PostgreSQL would start empty and the hub would seem to have lost its data), with how to move the files
 * aside; beside a cluster (a data dir that was on PostgreSQL already) the files are only named, as unused (the
 * returned note). Checked before anything is installed or started.
 */
export function checkSqliteData(dataDir: string): string | null {
  const dir = path.join(dataDir, 'ferretdb');
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.sqlite')) : [];
  if (files.length === 0) return null;
  const found = `${dir} holds SQLite data (${files.join(', ')})`;
  if (fs.existsSync(path.join(dataDir, 'postgres')))
    return `${found} from an older version, which is not read: this data dir's data is in PostgreSQL (${path.join(dataDir, 'postgres')})`;
  throw new EmbeddedStoreRefused(
    `${found}: this data dir is from an older version, which ran FerretDB on SQLite. FerretDB now stores in ` +
      `PostgreSQL and does not read or migrate that data. To start on PostgreSQL without it, move it aside ` +
      `(mv ${dir} ${dir}-sqlite) or set another DATA_DIR; the older version still reads it where it is`,
    EX_CONFIG
  );
}

/**
 * Refuses to start the embedded store where PostgreSQL cannot run, before anything starts: PostgreSQL is not
 * installed (the package step left it out: ZHONGSHU_INSTALL_PACKAGES=0; EX_UNAVAILABLE), or the launcher runs as
 * root and the `postgres` user, which the server then runs as, cannot reach DATA_DIR (`cannotReach`, from
 * postgresCannotReach, names the directory in the way; EX_CONFIG: another DATA_DIR, or that directory made
 * searchable).
 */
export function checkPostgresCanRun(
  dataDir: string,
  installed = findPostgres(path.join(dataDir, 'postgres')) !== null,
  cannotReach: (dataDir: string) => string | null = postgresCannotReach
): void {
  if (!installed)
    throw new EmbeddedStoreRefused(
      `the embedded FerretDB stores in PostgreSQL, which is not installed: ${POSTGRES_INSTALL_HINT}; or set MONGODB_URI to a MongoDB of your own`,
      EX_UNAVAILABLE
    );
  const blocked = cannotReach(dataDir);
  if (blocked) throw new EmbeddedStoreRefused(`PostgreSQL cannot run on ${dataDir}: ${blocked}`, EX_CONFIG);
}

/**
 * Why the PostgreSQL server could not reach a cluster under `dataDir`, or null where it can. Only a launcher run as
 * root has a question to answer: the server then runs as the `postgres` user, which needs the search bit on every
 * directory above DATA_DIR (DATA_DIR itself is given it by initCluster). Asked the way the server will run, as that
 * user: can it reach DATA_DIR (`test -e`) or, before DATA_DIR exists, search its nearest existing parent (`test -x`;
 * the directories between are made with mode 0755)?
 */
export function postgresCannotReach(dataDir: string): string | null {
  if (process.getuid?.() !== 0) return null;
  const user = postgresUser();
  if (!user) return 'running as root, PostgreSQL needs the `postgres` system user, which the Debian package creates';
  let existing = path.resolve(dataDir);
  while (!fs.existsSync(existing)) existing = path.dirname(existing);
  const probe = spawnSync('test', [existing === path.resolve(dataDir) ? '-e' : '-x', existing], { ...user, cwd: '/' });
  if (probe.status === 0) return null;
  if (probe.error || probe.status === null)
    return `could not ask as the postgres user: ${probe.error?.message ?? `test ended by ${probe.signal}`}`;
  return `the postgres user, which PostgreSQL runs as under root, cannot reach ${existing === path.resolve(dataDir) ? existing : `into ${existing}`}: every directory above DATA_DIR must be searchable by others`;
}

/**
 * The directory of the installed PostgreSQL's binaries (`PG_BIN_DIR` overrides), or null: the version that made
 * `clusterDir` (its PG_VERSION) where that one is installed, since another major version refuses its files; else
 * the newest.
 */
export function findPostgres(clusterDir?: string): string | null {
  const explicit = process.env.PG_BIN_DIR;
  if (explicit) return fs.existsSync(path.join(explicit, 'postgres')) ? explicit : null;
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return null;
  const made =
    clusterDir && fs.existsSync(path.join(clusterDir, 'PG_VERSION'))
      ? fs.readFileSync(path.join(clusterDir, 'PG_VERSION'), 'utf8').trim()
      : null;
  if (made && /^\d+$/.test(made) && fs.existsSync(path.join(root, made, 'bin', 'postgres')))
    return path.join(root, made, 'bin');
  const versions = fs
    .readdirSync(root)
    .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  const newest = versions[0];
  return newest ? path.join(root, newest, 'bin') : null;
}

/** The `postgres` system user's uid and gid, or null where there is none. */
function postgresUser(): { uid: number; gid: number } | null {
  const info = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const group = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (info.status !== 0 || group.status !== 0) return null;
  return { uid: Number(info.stdout.trim()), gid: Number(group.stdout.trim()) };
}

/** The uid and gid to run PostgreSQL as: ours, or the `postgres` user's when we are root. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const user = postgresUser();
  if (!user)
    throw new Error('running as root, PostgreSQL needs the `postgres` system user (the Debian package creates it)');
  return user;
}

function initCluster(binDir: string, dir: string, user: { uid: number; gid: number } | undefined): void {
  if (fs.existsSync(path.join(dir, 'PG_VERSION'))) return;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // The postgres user must be able to reach its cluster: DATA_DIR gets the search bit for others (not the read bit:
  // its listing stays private), e.g. a data dir made by mkdtemp (mode 0700).
  const dataDir = path.dirname(dir);
  const mode = fs.statSync(dataDir).mode;
  if (user && (mode & 0o001) === 0) {
    fs.chmodSync(dataDir, (mode & 0o7777) | 0o001);
    log(`postgres: ${dataDir} made searchable (o+x) for the postgres user`);
  }
  if (user) fs.chownSync(dir, user.uid, user.gid);
  log(`postgres: creating the cluster in ${dir} (first start only)`);
  const result = spawnSync(
    path.join(binDir, 'initdb'),
    ['-D', dir, '-U', POSTGRES_ROLE, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-instructions'],
    { encoding: 'utf8', ...(user ?? {}), cwd: os.tmpdir() }
  );
  if (result.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    const hint = user ? ' (as root, every directory above DATA_DIR must be searchable by the postgres user)' : '';
    throw new Error(`initdb failed${hint}: ${(result.stderr || result.stdout || String(result.error)).trim()}`);
  }
}

/**
 * FerretDB v1.24 pushes an equality filter down as `_jsonb->'field' @> value`, which the btree indexes it creates
 * (`(_jsonb->'field')`) cannot serve: every lookup, update or delete by `_id` scanned the whole table (10,000 node
 * documents read per `updateOne({ _id })`). A GIN index on `(_jsonb->'_id')` serves that operator: each FerretDB
 * table gets one, the existing ones here at every start (an index build, once, on a table that predates this) and new
 * ones as FerretDB creates them (an event trigger on CREATE TABLE in the same transaction). FerretDB does not list
 * them (its metadata knows only its own indexes) and drops them with their table. Real MongoDB needs none of this.
 * The indexes are built with `fastupdate = off`: with GIN's default, new entries go to a pending list that every
 * lookup reads whole until a vacuum, an autoanalyze or the list's size limit (gin_pending_list_limit, 4 MB) merges
 * it, and every update of a document adds one (the indexed column is the whole document, so no update is HOT).
 * Measured on 10,000 node documents, single-statement updates by `_id` at 8 in flight: 286-336 updates/s right after
 * the documents were inserted and about 1,000/s later with the default; about 1,550/s with fastupdate off.
 * The ledger's table also gets one on `(_jsonb->'key')`, for the reads that filter on a key's equality (the memory
 * gateway's: docs/ledger.md#how-reads-find-entries); among 1,000,000 entries `find({ key })` takes about 5 ms with it.
 * The tasks' table gets them on `state`, `submitted_by` and `context_id`: the lease sweep reads the claimed tasks,
 * a claim the queued ones, a filtered ListTasks a submitter's (docs/federation.md#task-reads).
 */
const ID_LOOKUP_SQL = `
SET client_min_messages = warning;
CREATE OR REPLACE FUNCTION public.zhongshu_id_lookup_index(rel oid) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE t text; ns text; idx text := 'zh_id_gin_' || rel; ireg regclass;
BEGIN
  SELECT format('%I.%I', n.nspname, c.relname), n.nspname INTO t, ns FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = rel AND c.relkind = 'r' AND c.relname NOT LIKE '\\_ferretdb\\_%'
     AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'public') AND n.nspname NOT LIKE 'pg\\_%'
     AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = '_jsonb' AND NOT a.attisdropped);
  IF t IS NULL THEN RETURN false; END IF;
  EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb -> %L)) WITH (fastupdate = off)', idx, t, '_id');
  -- The ledger's key (FerretDB names a collection's table <name>_<8 hex digits>): the memory gateway's reads.
  IF t ~ '\\.ledger_[0-9a-f]{8}$' THEN
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb -> %L)) WITH (fastupdate = off)', 'zh_key_gin_' || rel, t, 'key');
  END IF;
  -- The tasks' equality filters: state (the lease sweep, claims), submitted_by and context_id (filtered ListTasks).
  IF t ~ '\\.tasks_[0-9a-f]{8}$' THEN
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb -> %L)) WITH (fastupdate = off)', 'zh_state_gin_' || rel, t, 'state');
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb -> %L)) WITH (fastupdate = off)', 'zh_submitter_gin_' || rel, t, 'submitted_by');
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb -> %L)) WITH (fastupdate = off)', 'zh_context_gin_' || rel, t, 'context_id');
  END IF;
  -- An index made before fastupdate was turned off: off now, and the entries still in its pending list merged.
  ireg := to_regclass(format('%I.%I', ns, idx));
  IF EXISTS (SELECT 1 FROM pg_class i WHERE i.oid = ireg AND NOT coalesce('fastupdate=off' = ANY (i.reloptions), false)) THEN
    BEGIN
      EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', ireg);
      PERFORM gin_clean_pending_list(ireg);
    EXCEPTION WHEN others THEN
      -- The index serves lookups all the same (with its pending list); tried again at the next start.
      RAISE WARNING 'zhongshu: could not turn fastupdate off on %.%: %', ns, idx, SQLERRM;
    END;
  END IF;
  RETURN true;
EXCEPTION WHEN others THEN
  -- Runs inside FerretDB's CREATE TABLE: a failure here must not fail the collection (it only scans without it).
  RAISE WARNING 'zhongshu: no _id lookup index on %: %', t, SQLERRM;
  RETURN false;
END $fn$;
CREATE OR REPLACE FUNCTION public.zhongshu_on_create_table() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE r record;
BEGIN
  FOR r IN SELECT objid FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' AND object_type = 'table' LOOP
    PERFORM public.zhongshu_id_lookup_index(r.objid);
  END LOOP;
END $fn$;
DROP EVENT TRIGGER IF EXISTS zhongshu_id_lookup;
CREATE EVENT TRIGGER zhongshu_id_lookup ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION public.zhongshu_on_create_table();
SELECT count(*) FILTER (WHERE public.zhongshu_id_lookup_index(oid)) FROM pg_class WHERE relkind = 'r';
`;

async function installIdLookupIndexes(binDir: string, port: number): Promise<void> {
  // The port opens before the server accepts sessions: "the database system is starting up", or "... is not yet
  // accepting connections" while it recovers from a server that was killed (its WAL replayed): retried for 5 minutes.
  const deadline = Date.now() + 300_000;
  for (;;) {
    // Asynchronous: a first start on a large data dir builds indexes for minutes, and the launcher's event loop
    // must keep draining the servers' output meanwhile (a full pipe would stall PostgreSQL itself).
    const why = await new Promise<string | null>((resolve) => {
      const psql = execFile(
        path.join(binDir, 'psql'),
        [
          '-h',
          '127.0.0.1',
          '-p',
          String(port),
          '-U',
          POSTGRES_ROLE,
          '-d',
          'postgres',
          '-X',
          '-q',
          '-At',
          '-v',
          'ON_ERROR_STOP=1',
          '-f',
          '-'
        ],
        { encoding: 'utf8', cwd: os.tmpdir(), timeout: 600_000 },
        (err, stdout, stderr) => resolve(err ? (stderr || stdout || String(err)).trim() : null)
      );
      // A psql that could not connect exits before reading its script: the write's EPIPE is that same failure,
      // which the callback reports (and the loop retries), not an error of its own.
      psql.stdin?.on('error', () => undefined);
      psql.stdin?.end(ID_LOOKUP_SQL);
    });
    if (why === null) return;
    if (
      !/starting up|not yet accepting connections|in recovery mode|Connection refused/.test(why) ||
      Date.now() > deadline
    )
      throw new Error(`PostgreSQL: installing the _id lookup indexes failed: ${why}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export async function startPostgres(opts: {
  dataDir: string;
  /** 0 or absent: a free port. */
  port?: number;
  echo?: boolean;
  logFile?: string;
  /** More server settings (`-c name=value`), e.g. auto_explain's for a test reading plans from the log. */
  settings?: Record<string, string>;
}): Promise<ServerHandle & { url: string; port: number }> {
  const dir = path.join(opts.dataDir, 'postgres');
  const binDir = findPostgres(dir);
  if (!binDir) throw new Error(`the embedded FerretDB needs PostgreSQL: ${POSTGRES_INSTALL_HINT}`);
  const user = runAs();
  const blocked = postgresCannotReach(opts.dataDir);
  if (blocked) throw new Error(`PostgreSQL cannot run on ${opts.dataDir}: ${blocked}`);
  initCluster(binDir, dir, user);
  const binary = path.join(binDir, 'postgres');
  const pidFile = path.join(opts.dataDir, 'run', 'postgres.pid');
  await stopStale(pidFile, binary, STOP_SIGNAL, 20_000); // 20 s for its shutdown checkpoint, as at stop
  // A server killed outright leaves postmaster.pid; postgres itself checks whether that pid still runs.
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort());
    const handle = spawnServer({
      name: 'postgres',
      binary,
      pidFile,
      echo: opts.echo ?? true,
      logFile: opts.logFile,
      user,
      stopSignal: STOP_SIGNAL,
      args: [
        '-D',
        dir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'log_min_messages=warning',
        '-c',
        'log_checkpoints=off',
        // FerretDB opens a pool of connections per client connection burst; the default 100 is enough for one
        // hub, raised for benches that run several API processes.
        '-c',
        'max_connections=200',
        // FerretDB sends every filter as a prepared statement (`_jsonb->$1 @> $2`); a generic plan cannot match an
        // expression index (its key is a parameter), so a connection that settled on one scans for good. Custom
        // plans see `_jsonb->'_id'` and use the lookup index below.
        '-c',
        'plan_cache_mode=force_custom_plan',
        ...Object.entries(opts.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`])
      ]
    });
    try {
      await waitForPort('127.0.0.1', port, 60_000, handle.child);
      try {
        await installIdLookupIndexes(binDir, port);
      } catch (err) {
        await handle.stop();
        await handle.closed;
        throw err;
      }
      return { ...handle, url: `postgres://${POSTGRES_ROLE}@127.0.0.1:${port}/postgres`, port };
    } catch (err) {
      await handle.stop();
      await handle.closed;
      if (!isBindFailure(handle.output()) || attempt >= START_ATTEMPTS) {
        throw new Error(
          `PostgreSQL did not start: ${err instanceof Error ? err.message : String(err)}\n${handle.output(30)}`
        );
      }
      log(`postgres: port ${port} was taken; starting it again (attempt ${attempt + 1} of ${START_ATTEMPTS})`);
    }
  }
}
