/**
 * How the deploy activities make a file change survive a crash: fsync a file or directory, and replace a file
 * atomically (temporary name, fsync, rename). Releases and nginx config fragments are both written this way.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export function fsyncPath(p: string): void {
  const fd = fs.openSync(p, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes a file atomically (temporary name, fsync, rename), or removes it for null. */
export function replaceFile(file: string, content: string | null): void {
  if (content === null) {
    fs.rmSync(file, { force: true });
    return;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  fs.writeFileSync(tmp, content, { mode: 0o644 });
  fsyncPath(tmp);
  fs.renameSync(tmp, file);
}
