/**
 * Usage of one chat answer: tokens as the upstream reported them, or counted from the text when it reported none
 * (then `estimated`), and the cost from the model's price table.
 */

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** True when the upstream sent no usage and the tokens were counted here. */
  estimated: boolean;
}

/**
 * A token count for text when the upstream gives none: about four characters per token for Latin text, one token
 * per CJK character (BPE vocabularies rarely merge them), never 0 for non-empty text.
 */
export function estimateTokens(text: string): number {
  if (text.length === 0) return 0;
  let cjk = 0;
  for (const ch of text) if (/[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]/.test(ch)) cjk++;
  const other = [...text].length - cjk;
  return Math.max(1, cjk + Math.ceil(other / 4));
}

/** Prompt tokens of a message list when the upstream gives none: its text plus a few tokens per message. */
export function estimatePromptTokens(messages: { content?: unknown }[]): number {
  let n = 3;
  for (const m of messages)
    n += 4 + estimateTokens(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''));
  return n;
}

export function usageFrom(
  reported: { prompt_tokens?: number; completion_tokens?: number } | null | undefined,
  estimate: () => { prompt: number; completion: number }
): ChatUsage {
  const valid = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n) && n >= 0;
  if (reported && valid(reported.prompt_tokens) && valid(reported.completion_tokens)) {
    const p = Math.round(reported.prompt_tokens);
    const c = Math.round(reported.completion_tokens);
    return { prompt_tokens: p, completion_tokens: c, total_tokens: p + c, estimated: false };
  }
  const e = estimate();
  return {
    prompt_tokens: e.prompt,
    completion_tokens: e.completion,
    total_tokens: e.prompt + e.completion,
    estimated: true
  };
}

/** Cost in the price table's unit, rounded to 1e-9 so sums stay stable. */
export function costOf(
  usage: { prompt_tokens: number; completion_tokens: number },
  price: { prompt_per_1k: number; completion_per_1k: number }
): number {
  const raw = (usage.prompt_tokens * price.prompt_per_1k + usage.completion_tokens * price.completion_per_1k) / 1000;
  return Math.round(raw * 1e9) / 1e9;
}
