/** The chat gateway's pure parts: provider configuration, plans, the circuit breaker, token counting and cost. */
import { CircuitBreakers } from '../../core/chat/circuit-breaker';
import { planTable } from '../../core/chat/plans';
import { loadProviderCatalog, parseProviders, ProviderConfigError, providerKey } from '../../core/chat/providers.node';
import { ProviderCatalog } from '../../core/chat/providers';
import { costOf, estimateTokens, usageFrom } from '../../core/chat/usage';

describe('provider configuration', () => {
  it('reads YAML and JSON, with defaults, and builds fallback chains filtered by plan', () => {
    const yaml = `providers:
  - name: a
    base_url: http://127.0.0.1:1/v1/
    api_key_env: A_KEY
    models:
      - { id: m1, fallbacks: [m2], price: { prompt_per_1k: 0.5 } }
      - { id: only-s5, plans: [S5], kind: external }
`;
    const json = JSON.stringify([
      { name: 'b', base_url: 'http://127.0.0.1:2/v1', models: [{ id: 'm2', upstream: 'small', kind: 'local' }] }
    ]);
    const catalog = new ProviderCatalog([...parseProviders(yaml, 'yaml'), ...parseProviders(json, 'json')]);
    expect(catalog.provider('a')).toEqual({
      name: 'a',
      base_url: 'http://127.0.0.1:1/v1',
      api_key_env: 'A_KEY',
      timeout_ms: 60000
    });
    expect(catalog.model('m1')).toMatchObject({
      upstream: 'm1',
      owned_by: 'a',
      kind: 'chat',
      free_tier: false,
      price: { prompt_per_1k: 0.5, completion_per_1k: 0 }
    });
    expect(catalog.chain('m1').map((m) => m.id)).toEqual(['m1', 'm2']);
    expect(catalog.modelsFor('S1').map((m) => m.id)).toEqual(['m1', 'm2']);
    expect(catalog.modelsFor('S5').map((m) => m.id)).toEqual(['m1', 'only-s5', 'm2']);
    expect(catalog.modelsFor(null, 'local').map((m) => m.id)).toEqual(['m2']);
  });

  it('refuses a key in place of a variable name, unknown fields, duplicates and unknown fallbacks', () => {
    const one = (extra: Record<string, unknown>, models: unknown[] = [{ id: 'm' }]) =>
      JSON.stringify([{ name: 'p', base_url: 'http://x/v1', models, ...extra }]);
    expect(() => parseProviders(one({ api_key_env: 'sk-proj-abc123' }), 'cfg')).toThrow(ProviderConfigError);
    expect(() => parseProviders(one({ api_key: 'sk-abc' }), 'cfg')).toThrow(/api_key/);
    expect(() => new ProviderCatalog(parseProviders(one({}, [{ id: 'm' }, { id: 'm' }]), 'cfg'))).toThrow(
      /declared twice/
    );
    expect(() => new ProviderCatalog(parseProviders(one({}, [{ id: 'm', fallbacks: ['nope'] }]), 'cfg'))).toThrow(
      /fallback nope/
    );
    expect(() => loadProviderCatalog({ CHAT_PROVIDERS: one({}, [{ id: 'm', fallbacks: ['nope'] }]) })).toThrow(
      ProviderConfigError
    );
    expect(() => parseProviders('{ not: [valid', 'cfg')).toThrow(ProviderConfigError);
  });

  it('gives an empty catalogue when nothing is configured, and reads keys from the environment only', () => {
    expect(loadProviderCatalog({}).models.size).toBe(0);
    expect(providerKey('X_KEY', { X_KEY: 'secret' })).toBe('secret');
    expect(providerKey('X_KEY', {})).toBeUndefined();
    expect(providerKey(null, { X_KEY: 'secret' })).toBeUndefined();
  });
});

it('plans: defaults with overrides', () => {
  const t = planTable({ S2: { requests_per_minute: 7 } });
  expect(t.S2).toMatchObject({ requests_per_minute: 7, requests_per_day: 5000 });
  expect(t.S1.key_groups).toBe(false);
  expect(t.S4.key_groups).toBe(true);
});

it('circuit breaker: opens after N failures in a row, lets one trial through after the cool-down', () => {
  let now = 0;
  const b = new CircuitBreakers(3, 1000, () => now);
  expect(b.admit('p')).toBe(true);
  b.failure('p', 'x');
  b.failure('p', 'x');
  b.success('p');
  b.failure('p', 'x');
  b.failure('p', 'x');
  expect(b.state('p')).toBe('closed');
  b.failure('p', 'x');
  expect(b.state('p')).toBe('open');
  expect(b.admit('p')).toBe(false);
  expect(b.retryAfterS('p')).toBe(1);
  now = 1000;
  expect(b.state('p')).toBe('half_open');
  expect(b.admit('p')).toBe(true);
  expect(b.admit('p')).toBe(false); // one trial at a time
  b.failure('p', 'still down');
  expect(b.state('p')).toBe('open');
  now = 2000;
  expect(b.admit('p')).toBe(true);
  b.success('p');
  expect(b.state('p')).toBe('closed');
  expect(b.snapshot(['p'])[0]).toMatchObject({ name: 'p', state: 'closed', consecutive_failures: 0 });
});

it('usage: upstream figures when given, else counted (CJK one token per character), and cost per 1k', () => {
  expect(estimateTokens('')).toBe(0);
  expect(estimateTokens('abcdefgh')).toBe(2);
  expect(estimateTokens('你好世界')).toBe(4);
  expect(usageFrom({ prompt_tokens: 3, completion_tokens: 4 }, () => ({ prompt: 0, completion: 0 }))).toEqual({
    prompt_tokens: 3,
    completion_tokens: 4,
    total_tokens: 7,
    estimated: false
  });
  expect(usageFrom(null, () => ({ prompt: 5, completion: 6 }))).toEqual({
    prompt_tokens: 5,
    completion_tokens: 6,
    total_tokens: 11,
    estimated: true
  });
  expect(costOf({ prompt_tokens: 1000, completion_tokens: 500 }, { prompt_per_1k: 0.5, completion_per_1k: 2 })).toBe(
    1.5
  );
});
