/**
 * GET <base>/tlog/checkpoint as the tlog tests read it: the signed note split into its checkpoint text and its
 * signature lines (the hub's, then the cosignatures; C2SP signed-note).
 */
export interface ServedCheckpoint {
  /** The whole note, as served. */
  note: string;
  /** The checkpoint text (origin, size, root, and a final newline), without the signatures. */
  text: string;
  size: number;
  /** The root hash line (base64). */
  root: string;
  /** The signature lines, without their newlines. */
  lines: string[];
}

/** The checkpoint `baseUrl` (a hub's main listener) serves; throws unless it answers 200. */
export async function servedCheckpoint(baseUrl: string): Promise<ServedCheckpoint> {
  const res = await fetch(`${baseUrl}/tlog/checkpoint`);
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/tlog/checkpoint: ${res.status} ${await res.text()}`);
  const note = await res.text();
  const split = note.lastIndexOf('\n\n');
  return {
    note,
    text: note.slice(0, split + 1),
    size: Number(note.split('\n')[1]),
    root: note.split('\n')[2]!,
    lines: note.slice(split + 2, -1).split('\n')
  };
}
