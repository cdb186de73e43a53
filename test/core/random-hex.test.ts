import { randomHex } from '../../core/random-hex.node';

it('gives lowercase hex of the asked length, never the same bytes twice across refills of its pool', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 3000; i++) {
    const hex = randomHex(i % 2 ? 12 : 6);
    expect(hex).toMatch(i % 2 ? /^[0-9a-f]{24}$/ : /^[0-9a-f]{12}$/);
    seen.add(hex);
  }
  expect(seen.size).toBe(3000); // 27,000 bytes: six pools of 4 KiB
});
