/**
 * JSON Patch for the directory tree: application is the rfc6902 package's (wrapped so a patch is all or nothing and
 * may replace the root); the conflict detection between proposals is ours, so it is tested here.
 */
import {
  applyPatch,
  changedPaths,
  PatchError,
  pathsOverlap,
  touchedPaths,
  TREE_MAX_DEPTH
} from '../../core/federation/json-patch';

describe('applying a patch', () => {
  const doc = { services: { api: { port: 8080 } }, tags: ['a', 'b'] };

  it('applies every operation to a copy, leaving the input alone', () => {
    const out = applyPatch(doc, [
      { op: 'add', path: '/services/worker', value: { queue: 'q' } },
      { op: 'replace', path: '/services/api/port', value: 9090 },
      { op: 'add', path: '/tags/-', value: 'c' },
      { op: 'remove', path: '/tags/0' },
      { op: 'copy', from: '/services/api', path: '/services/api2' },
      { op: 'move', from: '/services/api2', path: '/moved' },
      { op: 'test', path: '/moved/port', value: 9090 }
    ]);
    expect(out).toEqual({
      services: { api: { port: 9090 }, worker: { queue: 'q' } },
      tags: ['b', 'c'],
      moved: { port: 9090 }
    });
    expect(doc).toEqual({ services: { api: { port: 8080 } }, tags: ['a', 'b'] });
  });

  it('replaces the root', () => {
    expect(applyPatch(doc, [{ op: 'replace', path: '', value: { fresh: true } }])).toEqual({ fresh: true });
  });

  it('is all or nothing and names the first operation that does not apply', () => {
    const attempt = () =>
      applyPatch(doc, [
        { op: 'add', path: '/ok', value: 1 },
        { op: 'remove', path: '/missing' },
        { op: 'test', path: '/ok', value: 2 }
      ]);
    expect(attempt).toThrow(PatchError);
    try {
      attempt();
    } catch (err) {
      expect((err as PatchError).index).toBe(1);
      expect((err as PatchError).message).toContain('/missing');
      expect((err as PatchError).message).not.toContain('/root');
    }
    expect(() => applyPatch(doc, [{ op: 'test', path: '/tags/0', value: 'z' }])).toThrow(/operation 0/);
    expect(() => applyPatch(doc, [{ op: 'move', from: '/services', path: '/services/inner' }])).toThrow(/into itself/);
  });

  it('refuses a result nested deeper than the tree allows', () => {
    let deep: unknown = 1;
    for (let i = 0; i < TREE_MAX_DEPTH; i++) deep = { d: deep };
    expect(() => applyPatch(doc, [{ op: 'add', path: '/deep', value: deep }])).toThrow(/deeper than 64/);
  });
});

describe('conflict detection between proposals', () => {
  it('lists the paths a patch writes (both ends of a move, none for a test)', () => {
    expect(
      touchedPaths([
        { op: 'add', path: '/a', value: 1 },
        { op: 'move', from: '/b', path: '/c' },
        { op: 'test', path: '/d', value: 1 }
      ])
    ).toEqual(['/a', '/b', '/c']);
  });

  it('finds the deepest paths that changed between two versions, escaping ~ and /', () => {
    expect(changedPaths({ a: { x: 1, y: 2 }, b: 1 }, { a: { x: 1, y: 3 }, b: 1 })).toEqual(['/a/y']);
    expect(changedPaths({ 'a/b': 1, 'c~d': 1 }, { 'a/b': 2, 'c~d': 2 })).toEqual(['/a~1b', '/c~0d']);
    expect(changedPaths({ list: [1, 2] }, { list: [1, 3] })).toEqual(['/list']);
    expect(changedPaths({ a: 1 }, { a: 1 })).toEqual([]);
    expect(changedPaths({ a: 1 }, { a: 1, b: 2 })).toEqual(['/b']);
  });

  it('treats a path and anything under it as overlapping, and the root as overlapping everything', () => {
    expect(pathsOverlap('/a', '/a/b')).toBe(true);
    expect(pathsOverlap('/a/b', '/a')).toBe(true);
    expect(pathsOverlap('/a', '/ab')).toBe(false);
    expect(pathsOverlap('', '/x')).toBe(true);
    expect(pathsOverlap('/x/1', '/x/2')).toBe(false);
  });
});
