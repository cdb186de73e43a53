/**
 * The body of a C2SP tlog-witness add-checkpoint request (c2sp.org/tlog-witness):
 *   old <size>\n  <0 to 63 base64 consistency proof hashes, one a line>  \n  <the signed checkpoint note>
 * and the checkpoint inside it (c2sp.org/tlog-checkpoint): origin, size, base64 root hash, optional extension lines.
 * Anything else is a request error naming the rule it breaks.
 */
import { splitNote, type SplitNote } from './cosignature.node';

export const MAX_PROOF_LINES = 63;
/** Tree sizes past 2^53 are not sizes this service can hold in a number (nor any log today). */
const SIZE = /^(0|[1-9][0-9]{0,15})$/;
const HASH = /^[A-Za-z0-9+/]{43}=$/;

export interface AddCheckpointRequest {
  oldSize: number;
  proof: Buffer[];
  note: SplitNote;
  checkpoint: { origin: string; size: number; root: Buffer };
}

export class AddCheckpointSyntaxError extends Error {}

export function parseAddCheckpoint(body: string): AddCheckpointRequest {
  const fail = (message: string): never => {
    throw new AddCheckpointSyntaxError(message);
  };
  const end = body.indexOf('\n\n');
  if (end < 0) fail('the body is not "old <size>", the proof lines, a blank line and the checkpoint');
  const [oldLine = '', ...proofLines] = body.slice(0, end).split('\n');
  const old = /^old (.*)$/.exec(oldLine);
  if (!old || !SIZE.test(old[1]!)) fail('the first line is not "old <size>" (a decimal without leading zeroes)');
  if (proofLines.length > MAX_PROOF_LINES) fail(`more than ${MAX_PROOF_LINES} consistency proof lines`);
  const proof = proofLines.map((line, i) =>
    HASH.test(line) ? Buffer.from(line, 'base64') : fail(`proof line ${i + 1} is not a base64 SHA-256 hash`)
  );
  const note = splitNote(body.slice(end + 2)) ?? fail('the checkpoint is not a signed note');
  const [origin = '', size = '', root = ''] = note.text.split('\n');
  if (!origin) fail('the checkpoint has no origin line');
  if (!SIZE.test(size)) fail('the checkpoint size line is not a decimal without leading zeroes');
  if (!HASH.test(root)) fail('the checkpoint root hash line is not a base64 SHA-256 hash');
  const oldSize = Number(old![1]);
  return {
    oldSize,
    proof,
    note,
    checkpoint: { origin, size: Number(size), root: Buffer.from(root, 'base64') }
  };
}
