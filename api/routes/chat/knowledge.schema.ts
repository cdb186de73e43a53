/**
 * The requests and answers of the knowledge base's administration (api/routes/chat/knowledge.ts). The card and
 * document bodies are the service's entry schemas (services/chat/knowledge-admin.ts), which also check each entry
 * of a Markdown import.
 */
import { z } from 'zod';
import { humanText, queryInt } from '../../../core/identifiers';
import {
  ANSWER_MAX,
  cardEntry,
  documentEntry,
  IMPORT_MAX_CARDS,
  IMPORT_MAX_DOCUMENTS,
  QUESTION_MAX,
  TEXT_MAX,
  TITLE_MAX
} from '../../../services/chat/knowledge-admin';
import { ERROR_BODY } from '../../response-docs';

export const cardBody = cardEntry;
export const documentBody = documentEntry;
export const cardParams = z.object({ card_id: z.string().regex(/^kc_[0-9a-f]{16}$/, 'a card id kc_…') });
export const documentParams = z.object({ document_id: z.string().regex(/^kd_[0-9a-f]{16}$/, 'a document id kd_…') });
export const page = z.object({
  offset: queryInt(0, 1_000_000).optional(),
  limit: queryInt(1, 500).optional().describe('default 100')
});

export const card = z.object({
  card_id: z.string(),
  question: z.string(),
  answer: z.string(),
  created_at: z.string(),
  updated_at: z.string()
});
export const document = z.object({
  document_id: z.string(),
  title: z.string(),
  text: z.string(),
  created_at: z.string(),
  updated_at: z.string()
});
export const importResult = z.object({
  ok: z.literal(true),
  cards_created: z.number().int(),
  cards_updated: z.number().int(),
  documents_created: z.number().int(),
  documents_updated: z.number().int(),
  version: z.number().int()
});

export const DUPLICATE = ERROR_BODY.describe(
  'Another card has the same question after normalisation (case, width, punctuation and spaces ignored)'
);

export const knowledgeStatus = z.object({
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
});

export const importBody = z.object({
  cards: z.array(cardBody).max(IMPORT_MAX_CARDS).default([]),
  documents: z.array(documentBody).max(IMPORT_MAX_DOCUMENTS).default([])
});

export const markdownImportBody = z.object({
  markdown: humanText(1_000_000, { multiline: true }).describe(
    'Each "## " heading starts an entry: "## Q: <question>" (or Question:, 问：, 问题：) is a knowledge card whose body is the answer; any other "## " heading (or a "# " heading with text before the first "## ") is a document titled by it. Empty entries are skipped.'
  )
});

export const markdownImportResult = importResult
  .extend({
    skipped: z
      .array(z.object({ kind: z.enum(['card', 'document']), heading: z.string(), reason: z.string() }))
      .describe(
        `entries not imported: longer than allowed (question ${QUESTION_MAX}, answer ${ANSWER_MAX}, title ${TITLE_MAX}, text ${TEXT_MAX} characters) or past 2,000 cards / 500 documents`
      )
  })
  .describe('Imported; entries that could not be are listed in skipped');
