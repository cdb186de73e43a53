/** Every activity the worker registers, built from dependencies created once by worker/. */
import { Ledger } from './store/ledger';
import { createLedgerActivities } from './ledger-activities';

export interface ActivityDeps {
  ledger: Ledger;
}

export function createActivities(deps: ActivityDeps) {
  return {
    ...createLedgerActivities(deps.ledger)
  };
}

export type Activities = ReturnType<typeof createActivities>;
