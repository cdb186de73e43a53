/**
 * Fails when a source file cites a section of the README or the old specification. The README is a short front
 * door and each capability is documented on its page under docs/; no specification document is in the repository.
 * So comments, descriptions and messages cite docs/<page>.md (with an anchor where it helps), never a section of the
 * README (README followed by a quoted section name, a colon, "section", or a comma and a section name) nor a
 * numbered SPEC section. Reads every tracked file except Markdown and prints file:line for each citation found.
 * Run by `npm run lint`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// Written with character classes so that this file does not match itself.
const CITATIONS = [/README[ ]"/, /README[:]/, /README[ ]section/, /README,[ ]*["A-Z]/, /SPEC(\.md)?[ ]*§/];

const root = path.resolve(__dirname, '../..');
const files = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && !f.endsWith('.md'));

const found: string[] = [];
for (const file of files) {
  const full = path.join(root, file);
  if (!fs.existsSync(full)) continue;
  const text = fs.readFileSync(full, 'utf8');
  if (text.includes('\0')) continue;
  text.split('\n').forEach((line, i) => {
    if (CITATIONS.some((re) => re.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`);
  });
}

if (found.length > 0) {
  for (const f of found) console.error(f);
  console.error(
    `${found.length} citation(s) of a section of the README or of the specification: cite the docs/ page instead`
  );
  process.exit(1);
}
console.log(`no citation of a section of the README or of the specification in ${files.length} files`);
