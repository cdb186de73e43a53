/**
 * The trial chat's knowledge base, administered under /admin/knowledge (Bearer ADMIN_TOKEN): knowledge cards
 * (question → answer, matched after normalisation) and knowledge-base documents (retrieved by passage), each with
 * create, read, update, delete, and a bulk import from JSON or Markdown (services/chat/knowledge-admin.ts). Stored
 * in MongoDB (store/chat/knowledge.ts); every change increments the knowledge base's version and sets a new change
 * stamp, which every API process checks before answering a trial chat and rebuilds its index on.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { createKnowledgeAdmin } from '../../../services/chat/knowledge-admin';
import type { KnowledgeStore } from '../../../store/chat/knowledge';
import {
  card,
  cardBody,
  cardParams,
  document,
  documentBody,
  documentParams,
  DUPLICATE,
  importBody,
  importResult,
  knowledgeStatus,
  markdownImportBody,
  markdownImportResult,
  page
} from './knowledge.schema';

const deleted = z.object({ ok: z.literal(true), deleted: z.string() });

export const knowledgeAdminRoutes: FastifyPluginAsyncZod<{ knowledge: KnowledgeStore }> = async (
  app,
  { knowledge }
) => {
  const admin = { auth: 'admin' as const };
  const kb = createKnowledgeAdmin(knowledge);

  app.get('/admin/knowledge', { config: admin, schema: { response: { 200: knowledgeStatus } } }, async () => ({
    ok: true as const,
    ...(await kb.status())
  }));

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
    async (request) => ({
      ok: true as const,
      ...(await kb.listCards(request.query.offset ?? 0, request.query.limit ?? 100))
    })
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
    async (request, reply) => reply.code(201).send({ ok: true as const, card: await kb.createCard(request.body) })
  );

  app.get(
    '/admin/knowledge/cards/:card_id',
    { config: admin, schema: { params: cardParams, response: { 200: z.object({ ok: z.literal(true), card }) } } },
    async (request) => ({ ok: true as const, card: await kb.getCard(request.params.card_id) })
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
    async (request) => ({ ok: true as const, card: await kb.updateCard(request.params.card_id, request.body) })
  );

  app.delete(
    '/admin/knowledge/cards/:card_id',
    { config: admin, schema: { params: cardParams, response: { 200: deleted } } },
    async (request) => {
      await kb.deleteCard(request.params.card_id);
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
    async (request) => ({
      ok: true as const,
      ...(await kb.listDocuments(request.query.offset ?? 0, request.query.limit ?? 100))
    })
  );

  app.post(
    '/admin/knowledge/documents',
    {
      config: admin,
      schema: { body: documentBody, response: { 201: z.object({ ok: z.literal(true), document }).describe('Created') } }
    },
    async (request, reply) =>
      reply.code(201).send({ ok: true as const, document: await kb.createDocument(request.body) })
  );

  app.get(
    '/admin/knowledge/documents/:document_id',
    {
      config: admin,
      schema: { params: documentParams, response: { 200: z.object({ ok: z.literal(true), document }) } }
    },
    async (request) => ({ ok: true as const, document: await kb.getDocument(request.params.document_id) })
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
    async (request) => ({
      ok: true as const,
      document: await kb.updateDocument(request.params.document_id, request.body)
    })
  );

  app.delete(
    '/admin/knowledge/documents/:document_id',
    { config: admin, schema: { params: documentParams, response: { 200: deleted } } },
    async (request) => {
      await kb.deleteDocument(request.params.document_id);
      return { ok: true as const, deleted: request.params.document_id };
    }
  );

  // Bulk import

  app.post(
    '/admin/knowledge/import',
    {
      config: admin,
      schema: {
        body: importBody,
        response: {
          200: importResult.describe(
            'Imported: a card with an existing question (after normalisation) and a document with an existing title are replaced'
          )
        }
      }
    },
    async (request) => ({ ok: true as const, ...(await kb.importAll(request.body.cards, request.body.documents)) })
  );

  app.post(
    '/admin/knowledge/import/markdown',
    { config: admin, schema: { body: markdownImportBody, response: { 200: markdownImportResult } } },
    async (request) => ({ ok: true as const, ...(await kb.importMarkdown(request.body.markdown)) })
  );
};
