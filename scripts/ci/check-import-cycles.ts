/**
 * Fails when the source files import each other in a circle, type-only imports included (a circle of types is
 * still a circle a reader has to untangle). Reads every tracked .ts file outside test/ with TypeScript's own
 * import scanner, follows relative imports, and prints each circle found (strongly connected components).
 * Run by `npm run lint`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(__dirname, '../..');
const files = execFileSync('git', ['ls-files', '*.ts'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && !f.startsWith('test/') && !f.endsWith('.d.ts'));
const known = new Set(files);

function resolve(from: string, spec: string): string | null {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  for (const candidate of [base, `${base}.ts`, `${base}/index.ts`]) if (known.has(candidate)) return candidate;
  return null;
}

const edges = new Map<string, string[]>();
for (const file of files) {
  const info = ts.preProcessFile(fs.readFileSync(path.join(root, file), 'utf8'), true, true);
  const targets = info.importedFiles
    .map((i) => i.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => resolve(file, spec))
    .filter((t): t is string => t !== null);
  edges.set(file, [...new Set(targets)]);
}

// Tarjan's strongly connected components; every component of two or more files is a circle.
let counter = 0;
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const circles: string[][] = [];
function visit(v: string): void {
  index.set(v, counter);
  low.set(v, counter++);
  stack.push(v);
  onStack.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!index.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v)!, low.get(w)!));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
  }
  if (low.get(v) === index.get(v)) {
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) circles.push(component.sort());
  }
}
for (const file of files) if (!index.has(file)) visit(file);

if (circles.length > 0) {
  for (const c of circles) console.error(`import circle: ${c.join(' <-> ')}`);
  console.error(
    `${circles.length} import circle(s) among ${files.length} files: break them (move the shared part down)`
  );
  process.exit(1);
}
console.log(`no import circles among ${files.length} files`);
