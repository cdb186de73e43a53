/**
 * The trial chat's knowledge base, administered under /admin/knowledge (Bearer ADMIN_TOKEN): knowledge cards
 * (question → answer, matched after normalisation) and knowledge-base documents (retrieved by passage), each with
 * create, read, update, delete, and a bulk import from JSON or Markdown (core/chat/knowledge.ts
 * parseKnowledgeMarkdown). Stored in MongoDB (store/chat/knowledge.ts); every change increments the knowledge
 * base's version and sets a new change stamp, which every API process checks before answering a trial chat and
 * rebuilds its index on.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { parseKnowledgeMarkdown } from '../../../core/chat/knowledge';
import { AppError, notFound } from '../../../core/errors';
import { humanText, queryInt } from '../../../core/identifiers';
import { DocumentDocument, CardDocument, DuplicateQuestionError, KnowledgeStore } from '../../../store/chat/knowledge';
import { ERROR_BODY } from '../../response-docs';

const QUESTION_MAX = 1000;
const ANSWER_MAX = 20_000;
const TITLE_MAX = 300;
const TEXT_MAX = 200_000;

const cardBody = z.object({ question: humanText(QUESTION_MAX), answer: humanText(ANSWER_MAX, { multiline: true }) });
const documentBody = z.object({ title: humanText(TITLE_MAX), text: humanText(TEXT_MAX, { multiline: true }) });
const cardParams = z.object({ card_id: z.string().regex(/^kc_[0-9a-f]{16}$/, 'a card id kc_…') });
const documentParams = z.object({ document_id: z.string().regex(/^kd_[0-9a-f]{16}$/, 'a document id kd_…') });
const page = z.object({
  offset: queryInt(0, 1_000_000).optional(),
  limit: queryInt(1, 500).optional().describe('default 100')
});

const card = z.object({
  card_id: z.string(),
  question: z.string(),
  answer: z.string(),
  created_at: z.string(),
  updated_at: z.string()
});
const document = z.object({
  document_id: z.string(),
  title: z.string(),
  text: z.string(),
  created_at: z.string(),
  updated_at: z.string()
});
const importResult = z.object({
  ok: z.literal(true),
  cards_created: z.number().int(),
  cards_updated: z.number().int(),
  documents_created: z.number().int(),
  documents_updated: z.number().int(),
  version: z.number().int()
});

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

const DUPLICATE = ERROR_BODY.describe(
  'Another card has the same question after normalisation (case, width, punctuation and spaces ignored)'
);

export const knowledgeAdminRoutes: FastifyPluginAsyncZod<{ knowledge: KnowledgeStore }> = async (
  app,
  { knowledge }
) => {
  const admin = { auth: 'admin' as const };
  const duplicate = (err: unknown): never => {
    if (err instanceof DuplicateQuestionError) throw new AppError('conflict', err.message);
    throw err;
  };

  app.get(
    '/admin/knowledge',
    {
      config: admin,
      schema: {
        response: {
          200: z.object({
            ok: z.literal(true),
            version: z
              .number()
              .int()
              .describe(
                'changes so far (every create, update, delete and import counts one; on FerretDB, changes made at the same moment may count once)'
              ),
            indexed_version: z.number().int().describe("the version this API process's index was built from"),
            cards: z.number().int(),
            documents: z.number().int(),
            passages: z.number().int().describe('cards plus document passages in the index')
          })
        }
      }
    },
    async () => {
      const index = await knowledge.current();
      const [cards, documents] = await Promise.all([knowledge.listCards(0, 1), knowledge.listDocuments(0, 1)]);
      return {
        ok: true as const,
        version: await knowledge.version(),
        indexed_version: index.version,
        cards: cards.total,
        documents: documents.total,
        passages: index.passages
      };
    }
  );

  // Cards

  app.get(
    '/admin/knowledge/cards',
    {
      config: admin,
      schema: {
        querystring: page,
        response: { 200: z.object({ ok: z.literal(true), total: z.number().int(), cards: z.array(card) }) }
      }
    },
    async (request) => {
      const { total, items } = await knowledge.listCards(request.query.offset ?? 0, request.query.limit ?? 100);
      return { ok: true as const, total, cards: items.map(cardOut) };
    }
  );

  app.post(
    '/admin/knowledge/cards',
    {
      config: admin,
      schema: {
        body: cardBody,
        response: { 201: z.object({ ok: z.literal(true), card }).describe('Created'), 409: DUPLICATE }
      }
    },
    async (request, reply) => {
      const doc = await knowledge.createCard(request.body.question, request.body.answer).catch(duplicate);
      return reply.code(201).send({ ok: true as const, card: cardOut(doc) });
    }
  );

  app.get(
    '/admin/knowledge/cards/:card_id',
    { config: admin, schema: { params: cardParams, response: { 200: z.object({ ok: z.literal(true), card }) } } },
    async (request) => {
      const doc = await knowledge.getCard(request.params.card_id);
      if (!doc) throw notFound(`No knowledge card ${request.params.card_id}`);
      return { ok: true as const, card: cardOut(doc) };
    }
  );

  app.put(
    '/admin/knowledge/cards/:card_id',
    {
      config: admin,
      schema: {
        params: cardParams,
        body: cardBody,
        response: { 200: z.object({ ok: z.literal(true), card }), 409: DUPLICATE }
      }
    },
    async (request) => {
      const doc = await knowledge
        .updateCard(request.params.card_id, request.body.question, request.body.answer)
        .catch(duplicate);
      if (!doc) throw notFound(`No knowledge card ${request.params.card_id}`);
      return { ok: true as const, card: cardOut(doc) };
    }
  );

  app.delete(
    '/admin/knowledge/cards/:card_id',
    {
      config: admin,
      schema: { params: cardParams, response: { 200: z.object({ ok: z.literal(true), deleted: z.string() }) } }
    },
    async (request) => {
      if (!(await knowledge.deleteCard(request.params.card_id)))
        throw notFound(`No knowledge card ${request.params.card_id}`);
      return { ok: true as const, deleted: request.params.card_id };
    }
  );

  // Documents

  app.get(
    '/admin/knowledge/documents',
    {
      config: admin,
      schema: {
        querystring: page,
        response: { 200: z.object({ ok: z.literal(true), total: z.number().int(), documents: z.array(document) }) }
      }
    },
    async (request) => {
      const { total, items } = await knowledge.listDocuments(request.query.offset ?? 0, request.query.limit ?? 100);
      return { ok: true as const, total, documents: items.map(documentOut) };
    }
  );

  app.post(
    '/admin/knowledge/documents',
    {
      config: admin,
      schema: { body: documentBody, response: { 201: z.object({ ok: z.literal(true), document }).describe('Created') } }
    },
    async (request, reply) => {
      const doc = await knowledge.createDocument(request.body.title, request.body.text);
      return reply.code(201).send({ ok: true as const, document: documentOut(doc) });
    }
  );

  app.get(
    '/admin/knowledge/documents/:document_id',
    {
      config: admin,
      schema: { params: documentParams, response: { 200: z.object({ ok: z.literal(true), document }) } }
    },
    async (request) => {
      const doc = await knowledge.getDocument(request.params.document_id);
      if (!doc) throw notFound(`No knowledge document ${request.params.document_id}`);
      return { ok: true as const, document: documentOut(doc) };
    }
  );

  app.put(
    '/admin/knowledge/documents/:document_id',
    {
      config: admin,
      schema: {
        params: documentParams,
        body: documentBody,
        response: { 200: z.object({ ok: z.literal(true), document }) }
      }
    },
    async (request) => {
      const doc = await knowledge.updateDocument(request.params.document_id, request.body.title, request.body.text);
      if (!doc) throw notFound(`No knowledge document ${request.params.document_id}`);
      return { ok: true as const, document: documentOut(doc) };
    }
  );

  app.delete(
    '/admin/knowledge/documents/:document_id',
    {
      config: admin,
      schema: { params: documentParams, response: { 200: z.object({ ok: z.literal(true), deleted: z.string() }) } }
    },
    async (request) => {
      if (!(await knowledge.deleteDocument(request.params.document_id)))
        throw notFound(`No knowledge document ${request.params.document_id}`);
      return { ok: true as const, deleted: request.params.document_id };
    }
  );

  // Bulk import

  app.post(
    '/admin/knowledge/import',
    {
      config: admin,
      schema: {
        body: z.object({
          cards: z.array(cardBody).max(2000).default([]),
          documents: z.array(documentBody).max(500).default([])
        }),
        response: {
          200: importResult.describe(
            'Imported: a card with an existing question (after normalisation) and a document with an existing title are replaced'
          )
        }
      }
    },
    async (request) => {
      const result = await knowledge.importAll(request.body.cards, request.body.documents);
      return { ok: true as const, ...result, version: await knowledge.version() };
    }
  );

  app.post(
    '/admin/knowledge/import/markdown',
    {
      config: admin,
      schema: {
        body: z.object({
          markdown: humanText(1_000_000, { multiline: true }).describe(
            'Each "## " heading starts an entry: "## Q: <question>" (or Question:, 问：, 问题：) is a knowledge card whose body is the answer; any other "## " heading (or a "# " heading with text before the first "## ") is a document titled by it. Empty entries are skipped.'
          )
        }),
        response: {
          200: importResult
            .extend({
              skipped: z
                .array(z.object({ kind: z.enum(['card', 'document']), heading: z.string(), reason: z.string() }))
                .describe(
                  `entries not imported: longer than allowed (question ${QUESTION_MAX}, answer ${ANSWER_MAX}, title ${TITLE_MAX}, text ${TEXT_MAX} characters) or past 2,000 cards / 500 documents`
                )
            })
            .describe('Imported; entries that could not be are listed in skipped')
        }
      }
    },
    async (request) => {
      const parsed = parseKnowledgeMarkdown(request.body.markdown);
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
      const cards = accept('card', parsed.cards, cardBody, 2000, (c) => c.question);
      const documents = accept('document', parsed.documents, documentBody, 500, (d) => d.title);
      const result = await knowledge.importAll(cards, documents);
      return { ok: true as const, ...result, version: await knowledge.version(), skipped };
    }
  );
};
