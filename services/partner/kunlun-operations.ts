/**
 * The partner channels' operations (POST /v1/federated/kunlun in clear, POST /v1/kunlun/secure inside an
 * envelope): hello, echo, ledger_head, ledger_entries, answered for the authenticated partner; and the opening of a
 * secure-channel envelope sealed to the hub's key-agreement key (core/partner/envelope.node.ts).
 */
import type { ServiceConfig } from '../../core/config.node';
import { AppError } from '../../core/errors';
import { publicEntry } from '../../core/ledger/ledger-entry';
import { EnvelopeError, openRequest } from '../../core/partner/envelope.node';
import type { Ledger } from '../../store/ledger/ledger';
import type { PartnerStore } from '../../store/partner/partners';
import type { HubKeys } from '../../store/keys/hub-keys';

export type KunlunOperation =
  | { op: 'hello' }
  | { op: 'echo'; message: string }
  | { op: 'ledger_head' }
  | { op: 'ledger_entries'; after: number; limit: number };

export interface KunlunDeps {
  config: Pick<ServiceConfig, 'SERVICE_DID'>;
  keys: Pick<HubKeys, 'kid' | 'keyAgreement'>;
  ledger: Ledger;
  partners: PartnerStore;
}

export function createKunlunOperations({ config, keys, ledger, partners }: KunlunDeps) {
  /** One operation for `partnerId`. */
  async function run(partnerId: string, op: KunlunOperation) {
    switch (op.op) {
      case 'hello': {
        const partner = await partners.find(partnerId);
        return {
          ok: true as const,
          op: op.op,
          partner_id: partnerId,
          partner_name: partner?.name ?? partnerId,
          hub: { did: config.SERVICE_DID, kid: keys.kid, key_agreement_kid: keys.keyAgreement.jwk.kid! },
          time: new Date().toISOString()
        };
      }
      case 'echo':
        return { ok: true as const, op: op.op, partner_id: partnerId, message: op.message };
      case 'ledger_head': {
        const head = await ledger.head();
        return { ok: true as const, op: op.op, size: head.size, root: head.root };
      }
      case 'ledger_entries': {
        const entries = (await ledger.after(op.after, op.limit)).map(publicEntry);
        return {
          ok: true as const,
          op: op.op,
          after: op.after,
          next_cursor: entries.length ? entries[entries.length - 1]!.seq : op.after,
          entries
        };
      }
    }
  }

  /** The plaintext of `partnerId`'s envelope and how to seal the answer; a bad envelope is 400. */
  function openEnvelope(envelope: Parameters<typeof openRequest>[0], partnerId: string) {
    try {
      return openRequest(envelope, partnerId, keys.keyAgreement);
    } catch (err) {
      if (err instanceof EnvelopeError) throw new AppError('invalid_request', err.message);
      throw err;
    }
  }

  return { run, openEnvelope };
}
