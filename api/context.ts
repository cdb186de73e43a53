/**
 * Everything the listeners share, built once per API process: config, logger, MongoDB, the ledger, the credential
 * and node stores, the Temporal client, the hub's keys and the endpoint directory. Closed in reverse order.
 */
import { Client, Connection } from '@temporalio/client';
import type { Logger } from 'pino';
import { createLogger } from '../core/logger';
import { Config, mongoUri, temporalAddress } from '../core/config';
import { connectMongo, ensureIndexes, Mongo } from '../activities/store/mongo';
import { Ledger } from '../activities/store/ledger';
import { CredentialStore } from '../activities/store/credentials';
import { NodeStore } from '../activities/store/nodes';
import { QuotaStore } from '../activities/store/quota';
import { EndpointDirectory } from './directory';
import { HubKeys, loadOrCreateHubKeys } from './keys';
import { loadAdminTokenHash } from './admin-token';

export interface ServiceContext {
  config: Config;
  logger: Logger;
  mongo: Mongo;
  ledger: Ledger;
  credentials: CredentialStore;
  nodes: NodeStore;
  quota: QuotaStore;
  temporal: Client;
  keys: HubKeys;
  adminTokenHash: string;
  directory: EndpointDirectory;
  close(): Promise<void>;
}

export async function createServiceContext(config: Config, logger = createLogger(config, 'zhongshu-hub')): Promise<ServiceContext> {
  const mongo = await connectMongo({ uri: mongoUri(config), dbName: config.MONGODB_DB });
  try {
    await ensureIndexes(mongo.db);
    const connection = await Connection.connect({ address: temporalAddress(config) });
    const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    const adminTokenHash = loadAdminTokenHash(config.dataDir, config.ADMIN_TOKEN, (msg) => logger.warn(msg));
    return {
      config,
      logger,
      mongo,
      ledger: new Ledger(mongo.db),
      credentials: new CredentialStore(mongo.db),
      nodes: new NodeStore(mongo.db),
      quota: new QuotaStore(mongo.db),
      temporal,
      keys: loadOrCreateHubKeys(config.dataDir),
      adminTokenHash,
      directory: new EndpointDirectory(),
      close: async () => {
        await connection.close().catch(() => undefined);
        await mongo.close();
      }
    };
  } catch (err) {
    await mongo.close();
    throw err;
  }
}
