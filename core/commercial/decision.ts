/**
 * Three-dimension decision scoring (docs/gateways.md): benefit 40 %, risk 35 %, cost 25 %; risk and cost are
 * negative indicators (lower is better). Pure arithmetic, so anyone can recompute a score by hand:
 *
 *   for each dimension d, over the options given: lo = min(d), hi = max(d)
 *     benefit:      b = (benefit - lo) / (hi - lo)            (the best benefit gets 1, the worst 0)
 *     risk, cost:   r = (hi - risk) / (hi - lo)               (the lowest risk/cost gets 1, the highest 0)
 *     when hi = lo (every option equal on d, a single option included): 1 for every option, so a dimension
 *     that does not tell the options apart neither rewards nor penalises any of them
 *   score = round2(40·b + 35·r + 25·c)                        (0 to 100; round2(x) = Math.round(100·x) / 100)
 *
 * Order, best first: higher score; then higher benefit; then lower risk; then lower cost; then the order given.
 * `recommended` is the first option's name.
 */
import { z } from 'zod';
import { humanText } from '../identifiers';

export const DECISION_WEIGHTS = { benefit: 40, risk: 35, cost: 25 } as const;
/** Most options one decision scores. */
export const MAX_OPTIONS = 100;
/** Largest benefit, risk or cost accepted (keeps every difference and sum finite and exact enough). */
export const MAX_FIGURE = 1e12;
export const MAX_OPTION_NAME = 128;

const figure = (what: string) =>
  z
    .number()
    .min(0, `${what} must not be negative`)
    .max(MAX_FIGURE, `${what} must be at most ${MAX_FIGURE}`)
    .describe(`${what}: a finite number from 0 to ${MAX_FIGURE}`);

export const decisionOption = z.object({
  name: humanText(MAX_OPTION_NAME, { min: 1 }).describe('the option name, unique within the request'),
  benefit: figure('benefit (higher is better)'),
  risk: figure('risk (lower is better)'),
  cost: figure('cost (lower is better)')
});
export type DecisionOption = z.infer<typeof decisionOption>;

/** The options, with duplicate names refused at the second occurrence's name. */
export const decisionOptions = z
  .array(decisionOption)
  .min(1, 'options must hold at least one option')
  .max(MAX_OPTIONS, `at most ${MAX_OPTIONS} options`)
  .superRefine((options, ctx) => {
    const seen = new Map<string, number>();
    options.forEach((o, i) => {
      const first = seen.get(o.name);
      if (first !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [i, 'name'],
          message: `duplicate option name '${o.name}' (also options.${first}.name)`
        });
      else seen.set(o.name, i);
    });
  });

export type ScoredOption = DecisionOption & { score: number };

/** 2 decimals, as ECMAScript's Math.round does it (half up on the double the product gives). */
export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

function normalised(values: number[], higherIsBetter: boolean): number[] {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  if (hi === lo) return values.map(() => 1);
  return values.map((v) => (higherIsBetter ? (v - lo) / (hi - lo) : (hi - v) / (hi - lo)));
}

/** Scores the options and orders them best first (module comment: the formula and the tie rule). */
export function scoreOptions(options: DecisionOption[]): { decision: ScoredOption[]; recommended: string } {
  if (options.length === 0) throw new Error('scoreOptions needs at least one option');
  const b = normalised(
    options.map((o) => o.benefit),
    true
  );
  const r = normalised(
    options.map((o) => o.risk),
    false
  );
  const c = normalised(
    options.map((o) => o.cost),
    false
  );
  const scored = options.map((o, i) => ({
    index: i,
    option: {
      name: o.name,
      benefit: o.benefit,
      risk: o.risk,
      cost: o.cost,
      score: round2(DECISION_WEIGHTS.benefit * b[i]! + DECISION_WEIGHTS.risk * r[i]! + DECISION_WEIGHTS.cost * c[i]!)
    }
  }));
  scored.sort(
    (x, y) =>
      y.option.score - x.option.score ||
      y.option.benefit - x.option.benefit ||
      x.option.risk - y.option.risk ||
      x.option.cost - y.option.cost ||
      x.index - y.index
  );
  const decision = scored.map((s) => s.option);
  return { decision, recommended: decision[0]!.name };
}
