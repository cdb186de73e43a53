/** Where MongoDB is, or how the launcher runs the embedded FerretDB (and its PostgreSQL) instead. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { port } from './values.node';

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
    POSTGRES_PORT: port
      .default(5433)
      .describe(
        'The port (loopback) of the PostgreSQL server the embedded FerretDB stores in (its cluster under DATA_DIR/postgres).'
      ),
    FERRETDB_DEBUG_PORT: port
      .default(0)
      .describe(
        "The embedded FerretDB's debug listener on loopback, 0 for off: GET /debug/metrics (Prometheus text: requests by command, connections); bench:heartbeat uses it to print the database commands per heartbeat."
      )
  })
});
export type MongoConfig = z.infer<typeof mongoSettings.schema>;
