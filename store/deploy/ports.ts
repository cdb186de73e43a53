/**
 * The port pool of deployment arbitration (docs/deploy.md#actions): one document per taken port,
 * `_id` = the port, and a unique index on `app`, so two allocations can never hold the same port, and an app never
 * holds two, whatever the number of API processes (the unique indexes settle every race; no transaction needed).
 */
import { Collection, Db } from 'mongodb';
import { AppError } from '../../core/errors';
import { isDuplicateKey } from '../mongo';

export interface PortDocument {
  _id: number;
  app: string;
  kind: 'pool' | 'registered';
  at: string;
}

export class PortPoolStore {
  private readonly ports: Collection<PortDocument>;
  constructor(
    db: Db,
    private readonly range: { first: number; last: number }
  ) {
    this.ports = db.collection<PortDocument>('deploy_ports');
  }

  /** The app's port, allocating a free one from the pool if it has none (idempotent per app). */
  async allocate(app: string): Promise<{ port: number; app: string; existing: boolean }> {
    for (let attempt = 0; attempt < 64; attempt++) {
      const held = await this.ports.findOne({ app });
      if (held) return { port: held._id, app, existing: true };
      const taken = new Set(
        (
          await this.ports
            .find({ _id: { $gte: this.range.first, $lte: this.range.last } }, { projection: { _id: 1 } })
            .toArray()
        ).map((d) => d._id)
      );
      const free: number[] = [];
      for (let p = this.range.first; p <= this.range.last; p++) if (!taken.has(p)) free.push(p);
      if (free.length === 0)
        throw new AppError('conflict', `the port pool ${this.range.first}-${this.range.last} is exhausted`);
      // A random free port: concurrent allocations rarely pick the same one; when they do, the unique _id decides.
      const port = free[Math.floor(Math.random() * free.length)]!;
      try {
        await this.ports.insertOne({ _id: port, app, kind: 'pool', at: new Date().toISOString() });
        return { port, app, existing: false };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    }
    throw new AppError('unavailable', 'the port pool is contended; retry', {}, { 'Retry-After': '1' });
  }

  /** Records an externally chosen port for an app; 409 when the port or the app is already taken otherwise. */
  async register(app: string, port: number): Promise<{ port: number; app: string; existing: boolean }> {
    try {
      await this.ports.insertOne({ _id: port, app, kind: 'registered', at: new Date().toISOString() });
      return { port, app, existing: false };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const same = await this.ports.findOne({ _id: port, app });
      if (same) return { port, app, existing: true };
      throw new AppError('conflict', `port ${port} or app ${app} is already registered`, { port, app });
    }
  }

  async release(by: { app: string } | { port: number }): Promise<PortDocument | null> {
    const filter = 'app' in by ? { app: by.app } : { _id: by.port };
    const doc = await this.ports.findOne(filter);
    if (!doc) return null;
    await this.ports.deleteOne({ _id: doc._id, app: doc.app });
    return doc;
  }

  async list(limit: number, offset: number): Promise<{ total: number; ports: PortDocument[] }> {
    const [total, ports] = await Promise.all([
      this.ports.countDocuments({}),
      this.ports.find({}).sort({ _id: 1 }).skip(offset).limit(limit).toArray()
    ]);
    return { total, ports };
  }
}
