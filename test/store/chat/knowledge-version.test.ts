/**
 * store/chat/knowledge.ts against the embedded FerretDB, two stores on one database standing for two API processes:
 * the first changes of a new knowledge base race to create its change document (FerretDB's upsert is not atomic;
 * schemathesis found a 500 there), and concurrent changes may count once on FerretDB, yet every change succeeds and
 * every process's index ends up holding everything written.
 */
import { KnowledgeStore } from '../../../store/chat/knowledge';
import { useStoreDb } from '../../support/store-db';

const store = useStoreDb('knowledge_version');

it('accepts concurrent first changes from two processes, and each index then holds every document', async () => {
  const a = new KnowledgeStore(store.db);
  const b = new KnowledgeStore(store.db);
  const first = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).createDocument(`first ${i}`, `alpha ${i}`))
  );
  expect(first.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual(
    []
  );
  expect(await a.version()).toBeGreaterThan(0);

  // Both indexes built now, then more concurrent changes (each may miss the counter on FerretDB, never the stamp).
  expect((await a.current()).passages).toBe((await b.current()).passages);
  for (let round = 0; round < 3; round++) {
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? a : b).createDocument(`round ${round} doc ${i}`, `beta ${round} ${i}`)
      )
    );
    const [ia, ib] = [await a.current(), await b.current()];
    const titles = (await a.listDocuments(0, 500)).items.map((d) => d.title);
    expect(titles).toHaveLength(20 + 10 * (round + 1));
    for (const index of [ia, ib]) expect(new Set(index.allPassages().map((p) => p.title))).toEqual(new Set(titles));
  }
});

it('imports the same cards and documents from two processes at once without an error', async () => {
  const a = new KnowledgeStore(store.db);
  const b = new KnowledgeStore(store.db);
  const cards = Array.from({ length: 10 }, (_, i) => ({ question: `shared question ${i}?`, answer: `answer ${i}` }));
  const documents = Array.from({ length: 10 }, (_, i) => ({ title: `shared title ${i}`, text: `text ${i}` }));
  const results = await Promise.all([a.importAll(cards, documents), b.importAll(cards, documents)]);
  expect(results.map((r) => r.cards_created + r.cards_updated)).toEqual([10, 10]);
  expect(results[0]!.cards_created + results[1]!.cards_created).toBe(10);
  expect(results[0]!.documents_created + results[1]!.documents_created).toBe(10);
  expect((await a.listCards(0, 500)).total).toBe(10);
  expect((await a.listDocuments(0, 500)).items.filter((d) => d.title.startsWith('shared title'))).toHaveLength(10);
});

it('imports a title again after the document that first had it was renamed', async () => {
  const store1 = new KnowledgeStore(store.db);
  await store1.importAll([], [{ title: 'renamed probe', text: 'first text' }]);
  const first = (await store1.listDocuments(0, 500)).items.find((d) => d.title === 'renamed probe')!;
  await store1.updateDocument(first._id, 'renamed probe, new title', 'first text');
  const again = await store1.importAll([], [{ title: 'renamed probe', text: 'second text' }]);
  expect(again).toMatchObject({ documents_created: 1, documents_updated: 0 });
  const titles = (await store1.listDocuments(0, 500)).items.map((d) => d.title);
  expect(titles).toEqual(expect.arrayContaining(['renamed probe', 'renamed probe, new title']));
  // The index holds the new document (its passages' titles are the documents' titles and the cards' questions).
  const questions = (await store1.listCards(0, 500)).items.map((c) => c.question);
  expect(new Set((await store1.current()).allPassages().map((p) => p.title))).toEqual(
    new Set([...titles, ...questions])
  );
});
