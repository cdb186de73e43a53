/**
 * The trial chat's knowledge (pure, no I/O): question normalisation for knowledge cards, tokenisation that works for
 * Chinese and English, and the retrieval index over cards and knowledge-base passages (MiniSearch's BM25+ ranking,
 * with our tokeniser), plus the Markdown import format. The store (store/chat/knowledge.ts) loads the documents;
 * the trial route (api/routes/chat/trial.ts) asks this index.
 *
 * Tokens: a run of Han / kana / Hangul characters becomes its character bigrams (a single character stays a
 * unigram), so "联邦节点" matches "节点" without a dictionary; a run of Latin letters or digits becomes one
 * lower-cased word, with a small English stop list left out. Text is NFKC-folded first (full-width letters and
 * digits, compatibility forms).
 *
 * Score: BM25+ ranks the passages; the best one answers when its relevance (the IDF-weighted share of the
 * question's distinct tokens that the passage contains, 0-1) reaches the threshold. Raw BM25 scores grow with
 * the question's length and the corpus, so they cannot carry a fixed threshold; the weighted share can.
 * With an embeddings model configured, passage vectors are attached to the index and the nearest passage by
 * cosine similarity answers too when it reaches its own threshold.
 */
import MiniSearch from 'minisearch';

export interface KnowledgeCard {
  id: string;
  question: string;
  answer: string;
}

export interface KnowledgeDocument {
  id: string;
  title: string;
  text: string;
}

export interface Passage {
  /** `<card or document id>#<n>`. */
  id: string;
  source_id: string;
  title: string;
  text: string;
}

export interface RetrievalHit {
  passage: Passage;
  /** MiniSearch's BM25+ score (ranking only). */
  bm25: number;
  /** IDF-weighted share of the question's distinct tokens found in the passage, 0-1 (the threshold applies here). */
  relevance: number;
}

const CJK_RUN = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+/gu;
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const WORD = /[\p{L}\p{N}]+/gu;

const ENGLISH_STOP_WORDS = new Set(
  (
    'a about an and any are as at be but by can could did do does for from had has have how i if in into is it its me my of often on or ' +
    'our please should so tell than that the their them then there these they this to was we were what when where which who why will with would you your'
  ).split(' ')
);
/** Function characters that split a Chinese run before bigrams are taken (question words, particles, pronouns). */
const CHINESE_STOP_CHARS =
  /[的了是吗呢么怎什吧啊呀嘛请问我你您他她它们这那哪个和与及或在把被给如何该能可以会要多少]+/gu;

/** A light English stemmer: plural and verb endings, so "verified" finds "verify" and "heartbeats" "heartbeat". */
function stem(word: string): string {
  if (word.length <= 3 || /\d/.test(word)) return word;
  if (/ie[sd]$/.test(word)) return `${word.slice(0, -3)}y`;
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ed')) return word.slice(0, -2);
  if (/(s|x|ch|sh)es$/.test(word)) return word.slice(0, -2);
  if (word.endsWith('s') && !word.endsWith('ss')) return word.slice(0, -1);
  return word;
}

/** Card matching: NFKC (width, compatibility forms), lower case, and no punctuation, symbols or spaces at all. */
export function normaliseQuestion(text: string): string {
  const folded = text.normalize('NFKC').toLowerCase();
  // A question of punctuation alone keeps it (collapsed spaces), so it still matches only itself.
  return folded.replace(/[\p{P}\p{S}\p{Z}\s]+/gu, '') || folded.replace(/\s+/g, ' ').trim();
}

/** Index and query tokens (see the module comment). */
export function tokenize(text: string): string[] {
  const folded = text.normalize('NFKC').toLowerCase();
  const tokens: string[] = [];
  for (const run of (folded.match(CJK_RUN) ?? []).flatMap((r) => r.split(CHINESE_STOP_CHARS).filter(Boolean))) {
    const chars = [...run];
    if (chars.length === 1) tokens.push(chars[0]!);
    for (let i = 0; i + 1 < chars.length; i++) tokens.push(chars[i]! + chars[i + 1]!);
  }
  const latin = folded.replace(CJK_RUN, ' ');
  for (const word of latin.match(WORD) ?? []) {
    if (CJK_CHAR.test(word) || ENGLISH_STOP_WORDS.has(word)) continue;
    tokens.push(stem(word));
  }
  return tokens;
}

/** Passages of at most about `max` characters, split at blank lines (then at sentence ends when a paragraph is long). */
export function splitPassages(text: string, max = 600): string[] {
  const paragraphs = text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter(Boolean);
  const out: string[] = [];
  let current = '';
  const push = (piece: string) => {
    if (current && current.length + piece.length + 1 > max) {
      out.push(current);
      current = '';
    }
    current = current ? `${current}\n${piece}` : piece;
  };
  for (const p of paragraphs) {
    if (p.length <= max) push(p);
    else for (const sentence of p.match(/[^。！？.!?]+[。！？.!?]*/gu) ?? [p]) push(sentence.trim());
  }
  if (current) out.push(current);
  return out;
}

export interface VectorHit {
  passage: Passage;
  /** Cosine similarity of the question's embedding and the passage's, -1 to 1. */
  cosine: number;
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na > 0 && nb > 0 ? dot / Math.sqrt(na * nb) : 0;
}

export class KnowledgeIndex {
  private readonly cards = new Map<string, KnowledgeCard>();
  private readonly passageList: Passage[];
  /** Passage embeddings, when an embeddings model is configured (attached after the build). */
  private vectors: Map<string, Float32Array> | null = null;
  private readonly search: MiniSearch<Passage>;
  private readonly tokenSets = new Map<string, Set<string>>();
  private readonly documentFrequency = new Map<string, number>();
  readonly passages: number;

  constructor(
    cards: KnowledgeCard[],
    documents: KnowledgeDocument[],
    /** Which change of the knowledge base this index reflects (store/chat/knowledge.ts). */
    readonly version: number
  ) {
    for (const card of cards) this.cards.set(normaliseQuestion(card.question), card);
    const passages: Passage[] = [];
    for (const card of cards)
      passages.push({ id: `${card.id}#0`, source_id: card.id, title: card.question, text: card.answer });
    for (const doc of documents) {
      splitPassages(doc.text).forEach((text, n) =>
        passages.push({ id: `${doc.id}#${n}`, source_id: doc.id, title: doc.title, text })
      );
    }
    this.search = new MiniSearch<Passage>({
      fields: ['title', 'text'],
      storeFields: ['source_id', 'title', 'text'],
      tokenize,
      processTerm: (term) => term,
      searchOptions: { boost: { title: 1.5 }, combineWith: 'OR', prefix: false, fuzzy: false }
    });
    this.search.addAll(passages);
    for (const p of passages) {
      const set = new Set(tokenize(`${p.title}\n${p.text}`));
      this.tokenSets.set(p.id, set);
      for (const t of set) this.documentFrequency.set(t, (this.documentFrequency.get(t) ?? 0) + 1);
    }
    this.passages = passages.length;
    this.passageList = passages;
  }

  /** Every passage (what an embeddings model embeds: title and text). */
  allPassages(): readonly Passage[] {
    return this.passageList;
  }

  attachVectors(vectors: Map<string, Float32Array>): void {
    this.vectors = vectors;
  }

  get hasVectors(): boolean {
    return this.vectors !== null && this.vectors.size > 0;
  }

  /** The passages nearest to a question's embedding, best first. */
  nearest(query: ArrayLike<number>, limit = 3): VectorHit[] {
    if (!this.vectors) return [];
    return this.passageList
      .filter((p) => this.vectors!.has(p.id))
      .map((passage) => ({ passage, cosine: cosine(query, this.vectors!.get(passage.id)!) }))
      .sort((a, b) => b.cosine - a.cosine)
      .slice(0, limit);
  }

  get cardCount(): number {
    return this.cards.size;
  }

  /** The card whose question matches `question` after normalisation, if any. */
  card(question: string): KnowledgeCard | undefined {
    const key = normaliseQuestion(question);
    return key ? this.cards.get(key) : undefined;
  }

  /** The best passages for `question`, best first (at most `limit`). */
  retrieve(question: string, limit = 3): RetrievalHit[] {
    const queryTokens = [...new Set(tokenize(question))];
    if (queryTokens.length === 0 || this.passages === 0) return [];
    const idf = (t: string) => {
      const df = this.documentFrequency.get(t) ?? 0;
      return Math.log(1 + (this.passages - df + 0.5) / (df + 0.5));
    };
    const total = queryTokens.reduce((sum, t) => sum + idf(t), 0);
    return this.search
      .search(queryTokens.join(' '))
      .slice(0, limit)
      .map((r) => {
        const tokens = this.tokenSets.get(String(r.id)) ?? new Set<string>();
        const found = queryTokens.reduce((sum, t) => sum + (tokens.has(t) ? idf(t) : 0), 0);
        const passage: Passage = {
          id: String(r.id),
          source_id: String(r.source_id),
          title: String(r.title),
          text: String(r.text)
        };
        return { passage, bm25: r.score, relevance: total > 0 ? found / total : 0 };
      });
  }
}

/** The trial chat's semantic answer: the best passage, and the next ones above the threshold too (at most 3). */
export function composeReply(hits: RetrievalHit[], threshold: number): string {
  const chosen = hits.filter((h, i) => i === 0 || h.relevance >= threshold).slice(0, 3);
  return chosen.map((h) => h.passage.text).join('\n\n');
}

export interface ParsedImport {
  cards: { question: string; answer: string }[];
  documents: { title: string; text: string }[];
}

const CARD_HEADING = /^(?:q|question|问|问题)\s*[:：]\s*/i;

/**
 * The Markdown import format: each `## ` heading starts an entry that runs to the next `#`/`## ` heading. A heading
 * starting with `Q:` (or `Question:`, `问：`, `问题：`) is a knowledge card (the rest of the heading is the question,
 * the body the answer); any other `## ` heading is a knowledge-base document (heading = title, body = text).
 * Text under a `# ` heading before any `## ` is a document titled by that heading. Entries with an empty body are
 * skipped.
 */
export function parseKnowledgeMarkdown(markdown: string): ParsedImport {
  const out: ParsedImport = { cards: [], documents: [] };
  let heading: { level: number; text: string } | null = null;
  let body: string[] = [];
  const flush = () => {
    const text = body.join('\n').trim();
    if (heading && text) {
      const card = heading.level === 2 && CARD_HEADING.test(heading.text);
      if (card && !heading.text.replace(CARD_HEADING, '').trim()) return void (body = []);
      if (card) out.cards.push({ question: heading.text.replace(CARD_HEADING, '').trim(), answer: text });
      else out.documents.push({ title: heading.text, text });
    }
    body = [];
  };
  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    const m = /^(#{1,2})\s+(.+?)\s*#*\s*$/.exec(line);
    if (m) {
      flush();
      heading = { level: m[1]!.length, text: m[2]!.trim() };
    } else body.push(line);
  }
  flush();
  return out;
}
