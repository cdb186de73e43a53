/**
 * The trial chat's knowledge base as the administrator changes it: knowledge cards (question → answer) and
 * documents, each created, read, updated, deleted, listed, and imported in bulk from JSON or Markdown
 * (core/chat/knowledge.ts parseKnowledgeMarkdown). A card whose question another card has (after normalisation) is
 * a 409 conflict; a card or document that is not there is a 404.
 */
import { z } from 'zod';
import { parseKnowledgeMarkdown } from '../../core/chat/knowledge';
import { AppError, notFound } from '../../core/errors';
import { humanText } from '../../core/identifiers';
import { DocumentDocument, CardDocument, DuplicateQuestionError, KnowledgeStore } from '../../store/chat/knowledge';

export const QUESTION_MAX = 1000;
export const ANSWER_MAX = 20_000;
export const TITLE_MAX = 300;
export const TEXT_MAX = 200_000;
/** The most cards and documents one import takes. */
export const IMPORT_MAX_CARDS = 2000;
export const IMPORT_MAX_DOCUMENTS = 500;

/** A card and a document as sent (by the routes' bodies, and each Markdown entry checked against them). */
export const cardEntry = z.object({
  question: humanText(QUESTION_MAX),
  answer: humanText(ANSWER_MAX, { multiline: true })
});
export const documentEntry = z.object({ title: humanText(TITLE_MAX), text: humanText(TEXT_MAX, { multiline: true }) });
type CardEntry = z.infer<typeof cardEntry>;
type DocumentEntry = z.infer<typeof documentEntry>;

const cardOut = (c: CardDocument) => ({
  card_id: c._id,
  question: c.question,
  answer: c.answer,
  created_at: c.created_at,
  updated_at: c.updated_at
});
const documentOut = (d: DocumentDocument) => ({
  document_id: d._id,
  title: d.title,
  text: d.text,
  created_at: d.created_at,
  updated_at: d.updated_at
});

const duplicate = (err: unknown): never => {
  if (err instanceof DuplicateQuestionError) throw new AppError('conflict', err.message);
  throw err;
};
const noCard = (id: string) => notFound(`No knowledge card ${id}`);
const noDocument = (id: string) => notFound(`No knowledge document ${id}`);

export type KnowledgeAdmin = ReturnType<typeof createKnowledgeAdmin>;

export function createKnowledgeAdmin(knowledge: KnowledgeStore) {
  return {
    /** The knowledge base's version, this process's index of it, and what it holds. */
    async status() {
      const index = await knowledge.current();
      const [cards, documents] = await Promise.all([knowledge.listCards(0, 1), knowledge.listDocuments(0, 1)]);
      return {
        version: await knowledge.version(),
        indexed_version: index.version,
        cards: cards.total,
        documents: documents.total,
        passages: index.passages
      };
    },

    async listCards(offset: number, limit: number) {
      const { total, items } = await knowledge.listCards(offset, limit);
      return { total, cards: items.map(cardOut) };
    },
    async createCard(entry: CardEntry) {
      return cardOut(await knowledge.createCard(entry.question, entry.answer).catch(duplicate));
    },
    async getCard(id: string) {
      const doc = await knowledge.getCard(id);
      if (!doc) throw noCard(id);
      return cardOut(doc);
    },
    async updateCard(id: string, entry: CardEntry) {
      const doc = await knowledge.updateCard(id, entry.question, entry.answer).catch(duplicate);
      if (!doc) throw noCard(id);
      return cardOut(doc);
    },
    async deleteCard(id: string): Promise<void> {
      if (!(await knowledge.deleteCard(id))) throw noCard(id);
    },

    async listDocuments(offset: number, limit: number) {
      const { total, items } = await knowledge.listDocuments(offset, limit);
      return { total, documents: items.map(documentOut) };
    },
    async createDocument(entry: DocumentEntry) {
      return documentOut(await knowledge.createDocument(entry.title, entry.text));
    },
    async getDocument(id: string) {
      const doc = await knowledge.getDocument(id);
      if (!doc) throw noDocument(id);
      return documentOut(doc);
    },
    async updateDocument(id: string, entry: DocumentEntry) {
      const doc = await knowledge.updateDocument(id, entry.title, entry.text);
      if (!doc) throw noDocument(id);
      return documentOut(doc);
    },
    async deleteDocument(id: string): Promise<void> {
      if (!(await knowledge.deleteDocument(id))) throw noDocument(id);
    },

    /** Imports cards and documents; an existing question (after normalisation) or title is replaced. */
    async importAll(cards: CardEntry[], documents: DocumentEntry[]) {
      const result = await knowledge.importAll(cards, documents);
      return { ...result, version: await knowledge.version() };
    },

    /** Imports the entries of a Markdown text; those too long or past the import's limits are listed as skipped. */
    async importMarkdown(markdown: string) {
      const parsed = parseKnowledgeMarkdown(markdown);
      const skipped: { kind: 'card' | 'document'; heading: string; reason: string }[] = [];
      const accept = <T>(
        kind: 'card' | 'document',
        items: T[],
        schema: z.ZodType<T>,
        max: number,
        heading: (item: T) => string
      ): T[] => {
        const out: T[] = [];
        for (const item of items) {
          const checked = schema.safeParse(item);
          const reason = !checked.success
            ? checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')
            : out.length >= max
              ? `more than ${max} ${kind}s`
              : null;
          if (reason) skipped.push({ kind, heading: heading(item).slice(0, 200), reason });
          else out.push(checked.data!);
        }
        return out;
      };
      const cards = accept('card', parsed.cards, cardEntry, IMPORT_MAX_CARDS, (c) => c.question);
      const documents = accept('document', parsed.documents, documentEntry, IMPORT_MAX_DOCUMENTS, (d) => d.title);
      const result = await knowledge.importAll(cards, documents);
      return { ...result, version: await knowledge.version(), skipped };
    }
  };
}
