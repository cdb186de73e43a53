/**
 * The trial chat's knowledge base in MongoDB: knowledge cards (`chat_knowledge_cards`, a unique index on the
 * normalised question) and knowledge-base documents (`chat_knowledge_documents`), plus one change document
 * (`chat_knowledge_meta`, `_id: "version"`) that every change updates after writing: it increments `version` and
 * sets `change` to a new random stamp.
 *
 * Each API process keeps its own retrieval index (core/chat/knowledge.ts) and the stamp it was built under; before
 * answering it reads the change document (one `_id` lookup) and rebuilds when another process (or itself) changed
 * anything. The document is read before the data, so an index is never older than the stamp it claims: a change
 * racing a rebuild only causes one more rebuild. The stamp, not the counter, decides: FerretDB does not make `$inc`
 * atomic, so concurrent changes there may count once (the counter is then short; measured: 40 concurrent changes
 * from two stores counted 10), but every change writes its own stamp, and the stamp left is the last one written,
 * after every change's data.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Collection, Db } from 'mongodb';
import { KnowledgeCard, KnowledgeDocument, KnowledgeIndex, normaliseQuestion } from '../../core/chat/knowledge';
import { isDuplicateKey, retryingUpsert } from '../mongo';

export interface CardDocument {
  _id: string;
  question: string;
  normalized: string;
  answer: string;
  created_at: string;
  updated_at: string;
}

export interface DocumentDocument {
  _id: string;
  title: string;
  text: string;
  created_at: string;
  updated_at: string;
}

interface MetaDocument {
  _id: 'version';
  version: number;
  /** A random stamp each change sets (absent before the first change). */
  change?: string;
}

export class DuplicateQuestionError extends Error {
  constructor(readonly question: string) {
    super(`A knowledge card already has this question (after normalisation): ${question}`);
  }
}

export class KnowledgeStore {
  private readonly cards: Collection<CardDocument>;
  private readonly documents: Collection<DocumentDocument>;
  private readonly meta: Collection<MetaDocument>;
  private index: KnowledgeIndex | null = null;
  /** The change stamp `index` was built under. */
  private indexChange = '';
  private rebuilding: Promise<KnowledgeIndex> | null = null;
  private indexesReady: Promise<void> | null = null;
  private embedder: ((texts: string[]) => Promise<number[][]>) | null = null;
  private onEmbedError: (err: unknown) => void = () => undefined;
  /** Embeddings by passage text, so a rebuild embeds only passages that changed. */
  private readonly embedded = new Map<string, Float32Array>();

  constructor(db: Db) {
    this.cards = db.collection('chat_knowledge_cards');
    this.documents = db.collection('chat_knowledge_documents');
    this.meta = db.collection('chat_knowledge_meta');
  }

  private ensureIndexes(): Promise<void> {
    this.indexesReady ??= this.cards
      .createIndex({ normalized: 1 }, { unique: true, name: 'normalized_question' })
      .then(() => undefined)
      .catch((err: unknown) => {
        this.indexesReady = null;
        throw err;
      });
    return this.indexesReady;
  }

  /**
   * An embeddings model for the passages (the trial chat sets it when TRIAL_EMBEDDINGS_MODEL names one): every
   * rebuild attaches vectors; when embedding fails the index answers by BM25 alone (the error is reported).
   */
  useEmbedder(embed: (texts: string[]) => Promise<number[][]>, onError: (err: unknown) => void): void {
    this.embedder = embed;
    this.onEmbedError = onError;
  }

  /** The index for the current version of the knowledge base (rebuilt here when any process changed it). */
  async current(): Promise<KnowledgeIndex> {
    const { version, change } = await this.changeState();
    // Both decide: a process of an earlier version increments the counter without setting a stamp.
    const fresh = () => this.index !== null && this.indexChange === change && this.index.version === version;
    if (fresh()) return this.index!;
    const index = await this.rebuild();
    // A rebuild already running when this call came may have read the state before it: one more then.
    return fresh() ? index : this.rebuild();
  }

  /** Builds the index from MongoDB (one rebuild at a time per process). */
  rebuild(): Promise<KnowledgeIndex> {
    this.rebuilding ??= (async () => {
      try {
        const { version, change } = await this.changeState();
        const [cards, documents] = await Promise.all([
          this.cards.find({}).toArray(),
          this.documents.find({}).toArray()
        ]);
        const index = new KnowledgeIndex(
          cards.map((c): KnowledgeCard => ({ id: c._id, question: c.question, answer: c.answer })),
          documents.map((d): KnowledgeDocument => ({ id: d._id, title: d.title, text: d.text })),
          version
        );
        if (this.embedder) await this.attachVectors(index, this.embedder);
        // One rebuild at a time, each reading the change document after the one before: the newest so far.
        this.index = index;
        this.indexChange = change;
        return index;
      } finally {
        this.rebuilding = null;
      }
    })();
    return this.rebuilding;
  }

  private async attachVectors(index: KnowledgeIndex, embed: (texts: string[]) => Promise<number[][]>): Promise<void> {
    const textOf = (p: { title: string; text: string }) => `${p.title}\n${p.text}`;
    const missing = [
      ...new Set(
        index
          .allPassages()
          .map(textOf)
          .filter((t) => !this.embedded.has(t))
      )
    ];
    try {
      for (let i = 0; i < missing.length; i += 64) {
        const batch = missing.slice(i, i + 64);
        const vectors = await embed(batch);
        if (vectors.length !== batch.length)
          throw new Error(`the embeddings model answered ${vectors.length} vectors for ${batch.length} texts`);
        batch.forEach((t, n) => this.embedded.set(t, Float32Array.from(vectors[n]!)));
      }
    } catch (err) {
      this.onEmbedError(err);
      return;
    }
    const live = new Set(index.allPassages().map(textOf));
    for (const t of this.embedded.keys()) if (!live.has(t)) this.embedded.delete(t);
    index.attachVectors(new Map(index.allPassages().map((p) => [p.id, this.embedded.get(textOf(p))!])));
  }

  async version(): Promise<number> {
    return (await this.changeState()).version;
  }

  private async changeState(): Promise<{ version: number; change: string }> {
    const doc = await this.meta.findOne({ _id: 'version' });
    return { version: doc?.version ?? 0, change: doc?.change ?? '' };
  }

  /** Called after every change's data is written (the first changes of a new database may race to create the document). */
  private async changed(): Promise<void> {
    await retryingUpsert(() =>
      this.meta.updateOne(
        { _id: 'version' },
        { $inc: { version: 1 }, $set: { change: randomBytes(8).toString('hex') } },
        { upsert: true }
      )
    );
  }

  // Cards

  async listCards(offset: number, limit: number): Promise<{ total: number; items: CardDocument[] }> {
    const [total, items] = await Promise.all([
      this.cards.countDocuments({}),
      this.cards.find({}).sort({ _id: 1 }).skip(offset).limit(limit).toArray()
    ]);
    return { total, items };
  }

  getCard(id: string): Promise<CardDocument | null> {
    return this.cards.findOne({ _id: id });
  }

  async createCard(question: string, answer: string): Promise<CardDocument> {
    await this.ensureIndexes();
    const now = new Date().toISOString();
    const doc: CardDocument = {
      _id: `kc_${randomBytes(8).toString('hex')}`,
      question,
      normalized: normaliseQuestion(question),
      answer,
      created_at: now,
      updated_at: now
    };
    try {
      await this.cards.insertOne(doc);
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateQuestionError(question);
      throw err;
    }
    await this.changed();
    return doc;
  }

  async updateCard(id: string, question: string, answer: string): Promise<CardDocument | null> {
    await this.ensureIndexes();
    // Checked first as well: FerretDB reports a unique-index clash in findAndModify without code 11000.
    if (
      await this.cards.findOne(
        { normalized: normaliseQuestion(question), _id: { $ne: id } },
        { projection: { _id: 1 } }
      )
    )
      throw new DuplicateQuestionError(question);
    let doc: CardDocument | null;
    try {
      doc = await this.cards.findOneAndUpdate(
        { _id: id },
        { $set: { question, normalized: normaliseQuestion(question), answer, updated_at: new Date().toISOString() } },
        { returnDocument: 'after' }
      );
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateQuestionError(question);
      throw err;
    }
    if (doc) await this.changed();
    return doc;
  }

  async deleteCard(id: string): Promise<boolean> {
    const res = await this.cards.deleteOne({ _id: id });
    if (res.deletedCount > 0) await this.changed();
    return res.deletedCount > 0;
  }

  // Documents

  async listDocuments(offset: number, limit: number): Promise<{ total: number; items: DocumentDocument[] }> {
    const [total, items] = await Promise.all([
      this.documents.countDocuments({}),
      this.documents.find({}).sort({ _id: 1 }).skip(offset).limit(limit).toArray()
    ]);
    return { total, items };
  }

  getDocument(id: string): Promise<DocumentDocument | null> {
    return this.documents.findOne({ _id: id });
  }

  async createDocument(title: string, text: string): Promise<DocumentDocument> {
    const now = new Date().toISOString();
    const doc: DocumentDocument = {
      _id: `kd_${randomBytes(8).toString('hex')}`,
      title,
      text,
      created_at: now,
      updated_at: now
    };
    await this.documents.insertOne(doc);
    await this.changed();
    return doc;
  }

  async updateDocument(id: string, title: string, text: string): Promise<DocumentDocument | null> {
    const doc = await this.documents.findOneAndUpdate(
      { _id: id },
      { $set: { title, text, updated_at: new Date().toISOString() } },
      { returnDocument: 'after' }
    );
    if (doc) await this.changed();
    return doc;
  }

  async deleteDocument(id: string): Promise<boolean> {
    const res = await this.documents.deleteOne({ _id: id });
    if (res.deletedCount > 0) await this.changed();
    return res.deletedCount > 0;
  }

  /**
   * Bulk import: a card whose normalised question exists already gets the new question and answer (so importing
   * the same file twice changes nothing); documents are added, or replace the document with the same title.
   * One change for the whole import.
   */
  async importAll(
    cards: { question: string; answer: string }[],
    documents: { title: string; text: string }[]
  ): Promise<{ cards_created: number; cards_updated: number; documents_created: number; documents_updated: number }> {
    await this.ensureIndexes();
    const now = new Date().toISOString();
    const result = { cards_created: 0, cards_updated: 0, documents_created: 0, documents_updated: 0 };
    try {
      for (const card of cards) {
        const normalized = normaliseQuestion(card.question);
        // A concurrent import or create of the same question may insert it first: the retry updates that card.
        const res = await retryingUpsert(() =>
          this.cards.updateOne(
            { normalized },
            {
              $set: { question: card.question, answer: card.answer, updated_at: now },
              $setOnInsert: { _id: `kc_${randomBytes(8).toString('hex')}`, normalized, created_at: now }
            },
            { upsert: true }
          )
        );
        if (res.upsertedCount > 0) result.cards_created++;
        else result.cards_updated++;
      }
      for (const doc of documents) {
        const upsert = (id: string) =>
          this.documents.updateOne(
            { title: doc.title },
            { $set: { text: doc.text, updated_at: now }, $setOnInsert: { _id: id, title: doc.title, created_at: now } },
            { upsert: true }
          );
        // Imported documents get an id derived from the title, so two imports of one file at once create it once (the
        // loser's insert clashes on _id and its retry updates it). A clash that persists is a document that took that
        // id and was renamed since: then a random id.
        const res = await retryingUpsert(() =>
          upsert(`kd_${createHash('sha256').update(doc.title).digest('hex').slice(0, 16)}`)
        ).catch((err: unknown) => {
          if (!isDuplicateKey(err)) throw err;
          return retryingUpsert(() => upsert(`kd_${randomBytes(8).toString('hex')}`));
        });
        if (res.upsertedCount > 0) result.documents_created++;
        else result.documents_updated++;
      }
    } finally {
      // Also after a failure part-way: what was written must reach every process's index.
      if (result.cards_created + result.cards_updated + result.documents_created + result.documents_updated > 0)
        await this.changed();
    }
    return result;
  }
}
