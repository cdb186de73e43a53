/**
 * Activities that append to the ledger for workflows. Each append carries an idempotency key derived from the
 * workflow's business id, so an activity retried after a lost response never writes a second entry.
 */
import { Ledger } from '../store/ledger/ledger';
import type { LedgerEntryKind } from '../core/ledger/ledger-entry';
import type { JsonValue } from '../core/ledger/canonical-json';

export interface AppendedRef {
  seq: number;
  event_id: string;
  duplicate: boolean;
}

export interface AppendLedgerEntryInput {
  kind: LedgerEntryKind;
  key: string;
  /** The value as canonical JSON text (held truths) or as an object (hub events). */
  value_json?: string;
  value?: { [key: string]: JsonValue };
  truth_type: string | null;
  did: string | null;
  idempotency_key: string;
}

export function createLedgerActivities(ledger: Ledger) {
  return {
    async appendLedgerEntry(input: AppendLedgerEntryInput): Promise<AppendedRef> {
      const value = input.value ?? (JSON.parse(input.value_json ?? '{}') as { [key: string]: JsonValue });
      const { entry, duplicate } = await ledger.append({
        kind: input.kind,
        key: input.key,
        value,
        truth_type: input.truth_type,
        did: input.did,
        idempotencyKey: input.idempotency_key
      });
      return { seq: entry.seq, event_id: entry.event_id, duplicate };
    }
  };
}

export type LedgerActivities = ReturnType<typeof createLedgerActivities>;
