/**
 * `npm run daemon:verify`: recomputes the daemon's audit chain (DATA_DIR/daemon_audit.jsonl, or the file given as
 * the first argument) line by line and prints the result as JSON: its length and root, or the first bad line's
 * number and why (edited, deleted or moved, torn by a crash). Exit status 0 when the chain verifies, 1 otherwise.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../core/config.node';
import { AUDIT_FILE, verifyAuditText } from '../core/daemon/audit.node';

function main(): void {
  const file = process.argv[2] ?? path.join(loadConfig().dataDir, AUDIT_FILE);
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const result = verifyAuditText(text);
  process.stdout.write(`${JSON.stringify({ file, ...result })}\n`);
  if (!result.ok) {
    process.stderr.write(`${file}: line ${result.first_bad_line} is bad: ${result.reason}\n`);
    process.exitCode = 1;
  }
}

main();
