/**
 * The partner store of a database, one per process and database: the partner authenticator
 * (api/plugins/auth/partner.ts) and the partner routes (api/routes/partner/, api/routes/admin/partners.ts) share it,
 * so the replay records are pruned (at most once a minute) by one store per process.
 */
import type { Db } from 'mongodb';
import { PartnerStore } from '../../store/partner/partners';

const stores = new WeakMap<Db, PartnerStore>();

export function partnerStore(db: Db): PartnerStore {
  let store = stores.get(db);
  if (!store) stores.set(db, (store = new PartnerStore(db)));
  return store;
}
