/**
 * The log's side of C2SP tlog-witness (c2sp.org/tlog-witness): the add-checkpoint request body it sends a witness,
 * and what it makes of the answers. Pure code (no I/O).
 *   200  the witness's cosignature line(s): the one of the configured witness key must verify
 *        (c2sp.org/tlog-cosignature) over the checkpoint's text, or nothing counts;
 *   409  `text/x.tlog.size`: the size the witness last cosigned for this log (the next request starts from it);
 *   403, 404, 422, other 4xx  a refusal (the witness does not trust the log's key, does not witness this log,
 *        finds the proof inconsistent or the checkpoint a fork, or the request bad);
 *   anything else (5xx, no answer)  the witness is unreachable for now.
 */
import { parseVerifierKey, splitNote, verifyCosignature } from './cosignature.node';

/** The request body: `old <size>`, the consistency proof (one base64 hash a line), a blank line, the signed note. */
export function addCheckpointBody(oldSize: number, proof: Buffer[], note: string): string {
  return `old ${oldSize}\n${proof.map((h) => `${h.toString('base64')}\n`).join('')}\n${note}`;
}

/** The size of a 409 answer's body (`<size>\n`), or null when it is not one. */
export function parseConflictSize(body: string): number | null {
  const m = /^(0|[1-9][0-9]{0,15})\n?$/.exec(body);
  return m ? Number(m[1]) : null;
}

/**
 * The cosignature line of witness key `verifierKey` among the answer's lines, verified over the checkpoint `note`'s
 * text: the line and its timestamp, or why none counts.
 */
export function verifiedCosignature(
  note: string,
  answer: string,
  verifierKey: string
): { line: string; timestamp: number } | { refused: string } {
  const key = parseVerifierKey(verifierKey);
  const split = splitNote(note);
  if (!key || !split) return { refused: 'the configured witness key or the checkpoint cannot be parsed' };
  const lines = answer.split('\n').filter((l) => l !== '');
  let named = 0;
  for (const line of lines) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/.exec(line);
    if (!m || m[1] !== key.name) continue;
    named++;
    const timestamp = verifyCosignature(split.text, Buffer.from(m[2]!, 'base64'), key);
    if (timestamp !== null) return { line: `${line}\n`, timestamp };
  }
  return {
    refused:
      named === 0
        ? `the answer has no cosignature line of ${key.name}`
        : `the cosignature of ${key.name} does not verify with the configured key (${verifierKey.split('+')[1]})`
  };
}
