/** Where MongoDB is, or how the launcher runs the embedded FerretDB (and its PostgreSQL) instead. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { port } from './values.node';

/** FERRETDB_BACKEND's settings (scripts/stack/postgres.ts chooseFerretBackend resolves `auto`). */
export const FERRETDB_BACKENDS = ['auto', 'sqlite', 'postgresql'] as const;
export type FerretBackendSetting = (typeof FERRETDB_BACKENDS)[number];

export const mongoSettings = defineCapability({
  name: 'mongo',
  title: 'MongoDB and the embedded FerretDB',
  page: null,
  readBy: ['launcher'],
  schema: z.object({
    MONGODB_URI: z
      .string()
      .regex(/^mongodb(\+srv)?:\/\//, 'must start with mongodb:// or mongodb+srv://')
      .optional()
      .describe(
        'Use this MongoDB instead of starting the embedded FerretDB (production sets it); unset: the embedded FerretDB on loopback.'
      )
      .meta(setting({ readBy: ['api', 'worker', 'launcher'], allowed: 'mongodb://… or mongodb+srv://…' })),
    MONGODB_DB: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,60}$/, 'letters, digits, _ and - only')
      .default('zhongshu_hub')
      .describe('The database name.')
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'letters, digits, _ and -, 1-60 characters' })),
    FERRETDB_PORT: port
      .default(27018)
      .describe('The embedded FerretDB port (loopback).')
      .meta(setting({ readBy: ['api', 'worker', 'launcher'] })),
    FERRETDB_BACKEND: z
      .enum(FERRETDB_BACKENDS)
      .default('auto')
      .describe(
        'The embedded FerretDB storage: `sqlite` (files under DATA_DIR/ferretdb) or `postgresql` (a PostgreSQL child server under DATA_DIR/postgres); `auto`: PostgreSQL where it is installed and can run on DATA_DIR, else SQLite, and SQLite for a data dir that holds SQLite data and no PostgreSQL cluster (the launcher says which and why).'
      ),
    POSTGRES_PORT: port
      .default(5433)
      .describe('The embedded PostgreSQL port (loopback) when FerretDB stores in PostgreSQL.'),
    MONGODB_ID_LOOKUPS: z
      .enum(['indexed', 'scan'])
      .default('indexed')
      .describe(
        "How the database answers a lookup by one `_id`: `indexed` (MongoDB; the embedded FerretDB on PostgreSQL) or `scan` (FerretDB on SQLite, which reads the collection for it). The launcher sets it for the processes it starts with the embedded FerretDB; set `scan` for a FerretDB on SQLite of your own. Quota and rate-limit slots are given back one `_id` per statement where indexed, by one `_id: { $in }` where every lookup scans; the ledger's keyed retries look records up likewise."
      )
      .meta(setting({ readBy: ['api', 'worker', 'launcher'] })),
    FERRETDB_DEBUG_PORT: port
      .default(0)
      .describe(
        "The embedded FerretDB's debug listener on loopback, 0 for off: GET /debug/metrics (Prometheus text: requests by command, connections); bench:heartbeat uses it to print the database commands per heartbeat."
      )
  })
});
export type MongoConfig = z.infer<typeof mongoSettings.schema>;
