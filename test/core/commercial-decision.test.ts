/** The decision formula (core/commercial/decision.ts), each expected score computed by hand in the comments. */
import { decisionOptions, round2, scoreOptions } from '../../core/commercial/decision';

describe('decision scoring', () => {
  it('min-max normalises each dimension, inverts risk and cost, and weights 40/35/25', () => {
    // benefit 60..100: A 1, B 0, C 0.5 · risk 10..40: A (40-20)/30 = 2/3, B 1, C 0 · cost 30..70: A (70-50)/40 = 0.5, B 1, C 0
    // A = 40·1 + 35·2/3 + 25·0.5 = 75.8333… → 75.83 · B = 0 + 35 + 25 = 60 · C = 40·0.5 = 20
    const { decision, recommended } = scoreOptions([
      { name: 'B', benefit: 60, risk: 10, cost: 30 },
      { name: 'C', benefit: 80, risk: 40, cost: 70 },
      { name: 'A', benefit: 100, risk: 20, cost: 50 }
    ]);
    expect(decision.map((o) => [o.name, o.score])).toEqual([
      ['A', 75.83],
      ['B', 60],
      ['C', 20]
    ]);
    expect(recommended).toBe('A');
    expect(decision[0]).toEqual({ name: 'A', benefit: 100, risk: 20, cost: 50, score: 75.83 });
  });

  it('a dimension on which every option is equal gives each option the full weight', () => {
    // cost equal (5 everywhere) → 25 each · benefit 0..10: X 1, Y 0 · risk 1..3: X 0, Y 1
    // X = 40 + 0 + 25 = 65 · Y = 0 + 35 + 25 = 60
    const { decision } = scoreOptions([
      { name: 'Y', benefit: 0, risk: 1, cost: 5 },
      { name: 'X', benefit: 10, risk: 3, cost: 5 }
    ]);
    expect(decision.map((o) => [o.name, o.score])).toEqual([
      ['X', 65],
      ['Y', 60]
    ]);
  });

  it('a single option scores 100', () => {
    expect(scoreOptions([{ name: 'only', benefit: 3, risk: 7, cost: 0 }])).toEqual({
      decision: [{ name: 'only', benefit: 3, risk: 7, cost: 0, score: 100 }],
      recommended: 'only'
    });
  });

  it('equal options all score 100 and keep the order given', () => {
    const same = { benefit: 1, risk: 1, cost: 1 };
    const { decision, recommended } = scoreOptions([
      { name: 'first', ...same },
      { name: 'second', ...same },
      { name: 'third', ...same }
    ]);
    expect(decision.map((o) => [o.name, o.score])).toEqual([
      ['first', 100],
      ['second', 100],
      ['third', 100]
    ]);
    expect(recommended).toBe('first');
  });

  it('equal scores: the higher benefit first, whatever the order given', () => {
    // benefit 0..8: Q 0, P 0.625, R 1 · risk 0..10: Q 0, P 0, R 1 · cost 0..10: Q 1, P 0, R 0
    // Q = 25·1 = 25 · P = 40·0.625 = 25 · R = 40 + 35 = 75
    const { decision } = scoreOptions([
      { name: 'Q', benefit: 0, risk: 10, cost: 0 },
      { name: 'P', benefit: 5, risk: 10, cost: 10 },
      { name: 'R', benefit: 8, risk: 0, cost: 10 }
    ]);
    expect(decision.map((o) => [o.name, o.score])).toEqual([
      ['R', 75],
      ['P', 25],
      ['Q', 25]
    ]);
  });

  it('round2 rounds to 2 decimals', () => {
    expect(round2(100 / 3)).toBe(33.33);
    expect(round2(200 / 3)).toBe(66.67);
  });

  it('the options schema refuses duplicates at the second name, and bounds', () => {
    const dup = decisionOptions.safeParse([
      { name: 'a', benefit: 1, risk: 1, cost: 1 },
      { name: 'a', benefit: 2, risk: 1, cost: 1 }
    ]);
    expect(dup.success).toBe(false);
    expect(dup.error!.issues[0]!.path).toEqual([1, 'name']);
    expect(decisionOptions.safeParse([]).success).toBe(false);
    expect(decisionOptions.safeParse([{ name: 'a', benefit: -1, risk: 1, cost: 1 }]).success).toBe(false);
    expect(decisionOptions.safeParse([{ name: 'a', benefit: Infinity, risk: 1, cost: 1 }]).success).toBe(false);
  });
});
