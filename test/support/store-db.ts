/**
 * A database of its own on the embedded FerretDB for one store test file: connected (with the service's indexes,
 * unless `indexes: false`) before its tests, dropped after them. Call it at the top level of the file and read
 * `.db` inside the tests.
 */
import { Db, MongoClient } from 'mongodb';
import { ensureIndexes } from '../../store/mongo';

export interface StoreDb {
  readonly db: Db;
}

export function useStoreDb(name: string, options: { indexes?: boolean } = {}): StoreDb {
  let client: MongoClient | undefined;
  let db: Db | undefined;
  beforeAll(async () => {
    client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!);
    db = client.db(`test_${name}_${Date.now()}`);
    if (options.indexes !== false) await ensureIndexes(db);
  });
  afterAll(async () => {
    await db?.dropDatabase();
    await client?.close();
  });
  return {
    get db(): Db {
      if (!db) throw new Error('useStoreDb: the database is connected in beforeAll; read .db inside a test');
      return db;
    }
  };
}
