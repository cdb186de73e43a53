/**
 * The node's credentials on disk: its id and key (shown once at registration) and the hub they belong to, in a
 * JSON file only its user can read (mode 0600, as ssh keeps its keys). Written to a temporary file of that mode,
 * fsynced and renamed, so a crash leaves the old file or the new one, never half of one; a file others can read is
 * refused when loaded.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface NodeCredentials {
  hub_url: string;
  node_id: string;
  api_key: string;
  /** When the hub issued them (ISO 8601). */
  registered_at?: string;
}

export class CredentialsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CredentialsError';
  }
}

export function saveCredentials(file: string, credentials: NodeCredentials): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    fs.fchmodSync(fd, 0o600); // whatever the umask or an older file of that name
    fs.writeSync(fd, `${JSON.stringify(credentials, null, 2)}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  syncDirectory(path.dirname(file));
}

/** The credentials in `file`, or null when there is none; throws on a file others can read or a broken one. */
export function loadCredentials(file: string): NodeCredentials | null {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0)
    throw new CredentialsError(
      `${file} can be read by others (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 it, or register again`
    );
  let parsed: Partial<NodeCredentials>;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    throw new CredentialsError(`${file} is not a credentials file (not JSON)`);
  }
  if (typeof parsed.node_id !== 'string' || typeof parsed.api_key !== 'string' || typeof parsed.hub_url !== 'string')
    throw new CredentialsError(`${file} lacks hub_url, node_id or api_key`);
  return parsed as NodeCredentials;
}

/** Makes a rename inside `dir` durable (a no-op where directories cannot be opened). */
export function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    /* not supported here */
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
