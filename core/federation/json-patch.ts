/**
 * JSON Patch (RFC 6902) over plain JSON values, with JSON Pointer (RFC 6901) paths: validation of a patch's shape,
 * application to a copy (the input is never modified), and the paths a patch touches.
 * Errors name the operation (by index) and why it does not apply.
 */
import { z } from 'zod';
import { applyPatch as applyRfc6902, Operation } from 'rfc6902';
import { jsonDepth } from '../strict-json';
import { canonicalJson, JsonValue } from '../ledger/canonical-json';

const pointer = z.string().regex(/^(\/[\s\S]*)?$/, 'a JSON Pointer: empty or starting with /');
export const patchOperation = z.discriminatedUnion('op', [
  z.object({ op: z.literal('add'), path: pointer, value: z.unknown() }).strict(),
  z.object({ op: z.literal('remove'), path: pointer }).strict(),
  z.object({ op: z.literal('replace'), path: pointer, value: z.unknown() }).strict(),
  z.object({ op: z.literal('move'), from: pointer, path: pointer }).strict(),
  z.object({ op: z.literal('copy'), from: pointer, path: pointer }).strict(),
  z.object({ op: z.literal('test'), path: pointer, value: z.unknown() }).strict()
]);
export const jsonPatch = z.array(patchOperation).min(1, 'a patch has at least one operation').max(500);
export type PatchOperation = z.infer<typeof patchOperation>;

export class PatchError extends Error {
  constructor(
    readonly index: number,
    readonly op: PatchOperation,
    reason: string
  ) {
    super(`operation ${index} (${op.op} ${op.path}): ${reason}`);
    this.name = 'PatchError';
  }
}

/** Applies `patch` to a copy of `doc` (RFC 6902, by the rfc6902 package); throws PatchError naming the first
 * operation that does not apply. The patch is all or nothing: nothing of a failed patch is kept. */
export function applyPatch(doc: JsonValue, patch: PatchOperation[]): JsonValue {
  patch.forEach((op, index) => {
    // RFC 6902 §4.4: a location cannot be moved into one of its children (the library reports a missing path).
    if (op.op === 'move' && op.path.startsWith(`${op.from}/`))
      throw new PatchError(index, op, 'cannot move a value into itself');
  });
  // The library patches in place and cannot replace the root: patch a holder whose one member is the document.
  const holder = { root: structuredClone(doc) };
  const under = (pointer: string) => `/root${pointer}`;
  const results = applyRfc6902(
    holder,
    patch.map((op) => ({
      ...op,
      path: under(op.path),
      ...('from' in op ? { from: under(op.from) } : {})
    })) as Operation[]
  );
  const failed = results.findIndex((r) => r !== null);
  if (failed >= 0) {
    const reason = (results[failed]!.message || results[failed]!.name).split('/root').join('');
    throw new PatchError(failed, patch[failed]!, reason);
  }
  // The tree is served and re-serialised on every read: keep it as shallow as any JSON body may be.
  if (patch.length > 0 && jsonDepth(holder.root) > TREE_MAX_DEPTH) {
    throw new PatchError(
      patch.length - 1,
      patch[patch.length - 1]!,
      `the result would nest deeper than ${TREE_MAX_DEPTH} levels`
    );
  }
  return holder.root;
}

/** The directory tree nests at most this deep (the default JSON_MAX_DEPTH of a request body). */
export const TREE_MAX_DEPTH = 64;

/** The JSON Pointers a patch writes to (path, and from for move). */
export function touchedPaths(patch: PatchOperation[]): string[] {
  return patch.flatMap((op) => (op.op === 'test' ? [] : op.op === 'move' ? [op.from, op.path] : [op.path]));
}

const isContainer = (v: unknown): v is object => typeof v === 'object' && v !== null;
const deepEqual = (a: unknown, b: unknown): boolean =>
  a === b || (a !== undefined && b !== undefined && canonicalJson(a) === canonicalJson(b));

/** Pointers whose values differ between two documents (the deepest differing paths). */
export function changedPaths(before: JsonValue | undefined, after: JsonValue | undefined, at = ''): string[] {
  if (deepEqual(before, after)) return [];
  const bothObjects = isContainer(before) && isContainer(after) && !Array.isArray(before) && !Array.isArray(after);
  if (!bothObjects) return [at];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].flatMap((k) =>
    changedPaths(
      (before as Record<string, JsonValue>)[k],
      (after as Record<string, JsonValue>)[k],
      `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`
    )
  );
}

/** True when one pointer equals the other or contains it (a write to either affects the other). */
export const pathsOverlap = (a: string, b: string): boolean =>
  a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`) || a === '' || b === '';
