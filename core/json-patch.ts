/**
 * JSON Patch (RFC 6902) over plain JSON values, with JSON Pointer (RFC 6901) paths: validation of a patch's shape,
 * application to a copy (the input is never modified), and the paths a patch touches.
 * Errors name the operation (by index) and why it does not apply.
 */
import { z } from 'zod';
import { jsonDepth } from './strict-json';
import type { JsonValue } from './canonical-json';

const pointer = z.string().refine((p) => p === '' || p.startsWith('/'), 'a JSON Pointer: empty or starting with /');
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

export function parsePointer(path: string): string[] {
  if (path === '') return [];
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

type Container = JsonValue[] | { [k: string]: JsonValue };
const isContainer = (v: unknown): v is Container => typeof v === 'object' && v !== null;
const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((v, i) => deepEqual(v, (b as unknown[])[i]));
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function arrayIndex(arr: JsonValue[], token: string, forAdd: boolean): number {
  if (forAdd && token === '-') return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new Error(`"${token}" is not an array index`);
  const i = Number(token);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new Error(`index ${i} is out of bounds (length ${arr.length})`);
  return i;
}

function get(doc: JsonValue, tokens: string[]): JsonValue {
  let cur: JsonValue = doc;
  for (const t of tokens) {
    if (Array.isArray(cur)) cur = cur[arrayIndex(cur, t, false)]!;
    else if (isContainer(cur) && Object.prototype.hasOwnProperty.call(cur, t)) cur = (cur as Record<string, JsonValue>)[t]!;
    else throw new Error(`path does not exist`);
  }
  return cur;
}

/** Returns the parent container and the last token; the root has no parent. */
function parentOf(doc: JsonValue, tokens: string[]): { parent: Container; last: string } {
  const parent = get(doc, tokens.slice(0, -1));
  if (!isContainer(parent)) throw new Error('parent is not an object or array');
  return { parent, last: tokens[tokens.length - 1]! };
}

function add(doc: JsonValue, tokens: string[], value: JsonValue): JsonValue {
  if (tokens.length === 0) return value;
  const { parent, last } = parentOf(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, true), 0, value);
  else parent[last] = value;
  return doc;
}

function remove(doc: JsonValue, tokens: string[]): JsonValue {
  if (tokens.length === 0) throw new Error('cannot remove the whole document');
  const { parent, last } = parentOf(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false), 1);
  else if (Object.prototype.hasOwnProperty.call(parent, last)) delete parent[last];
  else throw new Error('path does not exist');
  return doc;
}

/** Applies `patch` to a copy of `doc`; throws PatchError naming the first operation that does not apply. */
export function applyPatch(doc: JsonValue, patch: PatchOperation[]): JsonValue {
  let out = clone(doc);
  patch.forEach((op, index) => {
    try {
      const path = parsePointer(op.path);
      switch (op.op) {
        case 'add':
          out = add(out, path, clone(op.value as JsonValue));
          break;
        case 'remove':
          out = remove(out, path);
          break;
        case 'replace':
          get(out, path); // the target must exist
          if (path.length === 0) out = clone(op.value as JsonValue);
          else {
            const { parent, last } = parentOf(out, path);
            if (Array.isArray(parent)) parent[arrayIndex(parent, last, false)] = clone(op.value as JsonValue);
            else parent[last] = clone(op.value as JsonValue);
          }
          break;
        case 'move': {
          if (op.path.startsWith(`${op.from}/`)) throw new Error('cannot move a value into itself');
          const value = get(out, parsePointer(op.from));
          out = add(remove(out, parsePointer(op.from)), path, value);
          break;
        }
        case 'copy':
          out = add(out, path, clone(get(out, parsePointer(op.from))));
          break;
        case 'test':
          if (!deepEqual(get(out, path), op.value)) throw new Error('test failed: value differs');
          break;
      }
    } catch (err) {
      if (err instanceof PatchError) throw err;
      throw new PatchError(index, op, (err as Error).message);
    }
  });
  // The tree is served and re-serialised on every read: keep it as shallow as any JSON body may be.
  if (patch.length > 0 && jsonDepth(out) > TREE_MAX_DEPTH) {
    throw new PatchError(patch.length - 1, patch[patch.length - 1]!, `the result would nest deeper than ${TREE_MAX_DEPTH} levels`);
  }
  return out;
}

/** The directory tree nests at most this deep (the default JSON_MAX_DEPTH of a request body). */
export const TREE_MAX_DEPTH = 64;

/** The JSON Pointers a patch writes to (path, and from for move). */
export function touchedPaths(patch: PatchOperation[]): string[] {
  return patch.flatMap((op) => (op.op === 'test' ? [] : op.op === 'move' ? [op.from, op.path] : [op.path]));
}

/** Pointers whose values differ between two documents (the deepest differing paths). */
export function changedPaths(before: JsonValue | undefined, after: JsonValue | undefined, at = ''): string[] {
  if (deepEqual(before, after)) return [];
  const bothObjects = isContainer(before) && isContainer(after) && !Array.isArray(before) && !Array.isArray(after);
  if (!bothObjects) return [at];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].flatMap((k) =>
    changedPaths((before as Record<string, JsonValue>)[k], (after as Record<string, JsonValue>)[k], `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`)
  );
}

/** True when one pointer equals the other or contains it (a write to either affects the other). */
export const pathsOverlap = (a: string, b: string): boolean => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`) || a === '' || b === '';
