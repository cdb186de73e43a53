/**
 * The peer registry's use cases (routes: api/routes/federation/peers.ts): add or re-probe a peer hub, remove it.
 *
 * A probe fetches the peer's agent card (PROBE_TIMEOUT_MS) and, when the peer's log prefix is known, its
 * GET <prefix>/verifier-key and /witness-key: what it answers is recorded as `tlog_offered`, shown to the
 * administrator, and never trusted. Only the keys the administrator sends (`tlog`) are pinned: the checkpoint key
 * makes this hub witness the peer's log, the witness key makes the peer a witness of this hub's log
 * (services/tlog/peer-witnesses.ts builds the sets from the pins; this process reads them again at once, the others
 * within its refresh interval). `tlog` absent keeps what is pinned; null removes it; an object replaces it.
 *
 * A pin is refused when it conflicts with what the hub is or has (409): this hub's own origin or witness name (a
 * well-formed key, which may well be this hub's: a hub does not witness itself); a witness name another peer pinned,
 * or one TLOG_WITNESSES has with another key (one workflow per witness name).
 */
import { AppError, notFound } from '../../core/errors';
import { checkpointKeyProblem, witnessKeyProblem, type LogWitness } from '../../core/config/tlog.node';
import type { PeerDocument, PeerStore, PeerTlogOffer } from '../../store/federation/peers';
import type { TlogIdentity } from '../tlog/peer-witnesses';

export const PROBE_TIMEOUT_MS = 5000;
/** A key line is short; an answer longer than this is not one. */
const KEY_ANSWER_LIMIT = 1024;

export interface PeerTlogInput {
  url: string;
  verifier_key?: string | null;
  witness_key?: string | null;
}

export interface AddPeerInput {
  name: string;
  agent_card_url: string;
  tlog?: PeerTlogInput | null;
}

export interface PeerRegistry {
  list(): Promise<PeerDocument[]>;
  add(input: AddPeerInput): Promise<{ created: boolean; peer: PeerDocument }>;
  remove(id: string): Promise<void>;
}

export const peerId = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60) || 'peer';

const failure = (err: unknown) =>
  (err as Error).name === 'TimeoutError'
    ? `no answer within ${PROBE_TIMEOUT_MS} ms`
    : `fetch failed: ${(err as Error).message}`;

async function probeCard(
  url: string
): Promise<{ ok: true; name: string | null; version: string | null } | { ok: false; error: string }> {
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      headers: { accept: 'application/json' }
    });
    if (!res.ok) return { ok: false, error: `agent card answered HTTP ${res.status}` };
    const card = (await res.json()) as { name?: unknown; version?: unknown };
    return {
      ok: true,
      name: typeof card.name === 'string' ? card.name : null,
      version: typeof card.version === 'string' ? card.version : null
    };
  } catch (err) {
    return { ok: false, error: failure(err) };
  }
}

/** One key the peer serves at `<prefix>/<what>`, if it is a key of that kind. */
async function probeKey(
  prefix: string,
  what: 'verifier-key' | 'witness-key'
): Promise<{ key: string | null; error: string | null }> {
  const url = `${prefix}/${what}`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const text = (await res.text()).slice(0, KEY_ANSWER_LIMIT).trim();
    if (!res.ok) return { key: null, error: `${url} answered HTTP ${res.status}` };
    const problem = what === 'verifier-key' ? checkpointKeyProblem(text) : witnessKeyProblem(text);
    return problem ? { key: null, error: `${url}: ${problem}` } : { key: text, error: null };
  } catch (err) {
    return { key: null, error: `${url}: ${failure(err)}` };
  }
}

async function probeKeys(prefix: string): Promise<PeerTlogOffer> {
  const [log, witness] = await Promise.all([probeKey(prefix, 'verifier-key'), probeKey(prefix, 'witness-key')]);
  const errors = [log.error, witness.error].filter((e) => e !== null);
  return {
    fetched_at: new Date().toISOString(),
    verifier_key: log.key,
    witness_key: witness.key,
    error: errors.length > 0 ? errors.join('; ') : null
  };
}

export function createPeerRegistry(deps: {
  peers: PeerStore;
  /** This hub's origin and witness name, and the witnesses of TLOG_WITNESSES (for the checks above). */
  self: TlogIdentity;
  settingsWitnesses: LogWitness[];
  /** Reads the registry's keys again in this process (services/tlog/peer-witnesses.ts). */
  refreshTlog: () => Promise<void>;
}): PeerRegistry {
  const { peers } = deps;
  // A failed read is retried by the periodic refresh (within seconds): the change is stored either way.
  const refreshTlog = () => deps.refreshTlog().catch(() => undefined);

  async function checkPins(id: string, tlog: PeerTlogInput): Promise<void> {
    if (tlog.verifier_key && tlog.verifier_key.split('+')[0] === deps.self.origin)
      throw new AppError('conflict', "That is this hub's own log: a hub does not witness itself", {
        fields: [{ field: 'body.tlog.verifier_key', message: `the origin ${deps.self.origin} is this hub's` }]
      });
    if (!tlog.witness_key) return;
    const name = tlog.witness_key.split('+')[0]!;
    if (name === deps.self.witnessName)
      throw new AppError('conflict', "That is this hub's own witness: a hub does not witness itself", {
        fields: [{ field: 'body.tlog.witness_key', message: `the name ${name} is this hub's witness name` }]
      });
    const setting = deps.settingsWitnesses.find((w) => w.name === name);
    if (setting && setting.verifierKey !== tlog.witness_key)
      throw new AppError('conflict', `TLOG_WITNESSES has a witness named ${name} with another key`, {
        witness: name
      });
    const other = (await peers.list()).find((p) => p._id !== id && p.tlog?.witness_key?.split('+')[0] === name);
    if (other)
      throw new AppError('conflict', `Peer ${other._id} has a witness named ${name} pinned`, {
        witness: name,
        peer_id: other._id
      });
  }

  return {
    list: () => peers.list(),

    async add({ name, agent_card_url, tlog }) {
      const id = peerId(name);
      const existing = await peers.find(id);
      if (tlog) await checkPins(id, tlog);
      const now = new Date().toISOString();
      const pinned =
        tlog === undefined
          ? (existing?.tlog ?? null)
          : tlog === null
            ? null
            : {
                url: tlog.url.replace(/\/+$/, ''),
                verifier_key: tlog.verifier_key ?? null,
                witness_key: tlog.witness_key ?? null,
                pinned_at: now
              };
      const [card, offered] = await Promise.all([
        probeCard(agent_card_url),
        pinned ? probeKeys(pinned.url) : Promise.resolve(null)
      ]);
      const doc: PeerDocument = {
        _id: id,
        name,
        agent_card_url,
        added_at: existing?.added_at ?? now,
        last_probe_at: now,
        last_contact_at: card.ok ? now : (existing?.last_contact_at ?? null),
        last_status: card.ok ? 'reachable' : 'unreachable',
        last_error: card.ok ? null : card.error,
        card_name: card.ok ? card.name : (existing?.card_name ?? null),
        card_version: card.ok ? card.version : (existing?.card_version ?? null),
        tlog: pinned,
        tlog_offered: offered
      };
      await peers.save(doc);
      await refreshTlog();
      return { created: !existing, peer: doc };
    },

    async remove(id) {
      if (!(await peers.remove(id))) throw notFound(`No peer ${id}`);
      await refreshTlog();
    }
  };
}
