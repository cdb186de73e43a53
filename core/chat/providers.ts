/**
 * Model providers: any OpenAI-compatible endpoint (OpenAI, llama.cpp's server, Ollama, vLLM, an internal gateway),
 * described by configuration, never by code. This module is the schema and the catalogue built from it (pure: no
 * I/O); core/chat/providers.node.ts reads CHAT_PROVIDERS_FILE / CHAT_PROVIDERS and the keys' environment variables.
 * Reused by the local daemon.
 *
 * A provider's key is never part of the configuration: `api_key_env` names the environment variable that holds it,
 * and only the process environment is ever read for it.
 */
import { z } from 'zod';

export const MODEL_KINDS = ['chat', 'external', 'local'] as const;
export type ModelKind = (typeof MODEL_KINDS)[number];

const modelId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, 'letters, digits and . _ : / - (at most 128)');
const price = z.number().min(0).max(1000);

export const providerModelSchema = z.strictObject({
  /** Our model id, as clients name it in `model`. */
  id: modelId,
  /** The provider's name for it (default: the same as `id`). */
  upstream: z.string().min(1).max(200).optional(),
  owned_by: z.string().min(1).max(100).optional(),
  free_tier: z.boolean().default(false),
  /** Price per 1,000 tokens, in the account's currency unit. */
  price: z
    .strictObject({ prompt_per_1k: price.default(0), completion_per_1k: price.default(0) })
    .default({ prompt_per_1k: 0, completion_per_1k: 0 }),
  kind: z.enum(MODEL_KINDS).default('chat'),
  /** Our model ids to try, in order, when every attempt at this one failed before its first byte. */
  fallbacks: z.array(modelId).max(10).default([]),
  /** Plans whose keys may use this model (default: every plan). */
  plans: z
    .array(z.string().regex(/^[A-Za-z0-9_-]{1,20}$/))
    .max(20)
    .optional()
});

export const providerSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'letters, digits, _ and - (at most 64)'),
  base_url: z.url().refine((u) => /^https?:\/\//.test(u), 'must be an http(s) URL'),
  /** The NAME of the environment variable holding this provider's key (unset: no key is sent). */
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name (not the key itself)')
    .optional(),
  timeout_ms: z.number().int().min(100).max(600_000).default(60_000),
  models: z.array(providerModelSchema).min(1).max(500)
});

export const providersFileSchema = z.union([
  z.array(providerSchema).max(100),
  z.strictObject({ providers: z.array(providerSchema).max(100) })
]);

export type ProviderConfig = z.infer<typeof providerSchema>;
export type ProviderModelConfig = z.infer<typeof providerModelSchema>;

/** One model as the gateway routes it: our id, its provider, and what it costs. */
export interface CatalogModel {
  id: string;
  upstream: string;
  owned_by: string;
  free_tier: boolean;
  kind: ModelKind;
  price: { prompt_per_1k: number; completion_per_1k: number };
  fallbacks: string[];
  plans: string[] | null;
  provider: string;
}

export interface CatalogProvider {
  name: string;
  base_url: string;
  api_key_env: string | null;
  timeout_ms: number;
}

/** The providers and models the configuration declares, checked for consistency. */
export class ProviderCatalog {
  readonly providers = new Map<string, CatalogProvider>();
  readonly models = new Map<string, CatalogModel>();
  /** Seconds since the epoch at which the catalogue was built (the `created` of each model). */
  readonly created: number;

  constructor(providers: ProviderConfig[], createdAt = Date.now()) {
    this.created = Math.floor(createdAt / 1000);
    for (const p of providers) {
      if (this.providers.has(p.name)) throw new Error(`provider ${p.name} is declared twice`);
      this.providers.set(p.name, {
        name: p.name,
        base_url: p.base_url.replace(/\/+$/, ''),
        api_key_env: p.api_key_env ?? null,
        timeout_ms: p.timeout_ms
      });
      for (const m of p.models) {
        if (this.models.has(m.id))
          throw new Error(
            `model ${m.id} is declared twice (providers ${this.models.get(m.id)!.provider} and ${p.name})`
          );
        this.models.set(m.id, {
          id: m.id,
          upstream: m.upstream ?? m.id,
          owned_by: m.owned_by ?? p.name,
          free_tier: m.free_tier,
          kind: m.kind,
          price: m.price,
          fallbacks: m.fallbacks,
          plans: m.plans ?? null,
          provider: p.name
        });
      }
    }
    for (const m of this.models.values()) {
      for (const f of m.fallbacks) {
        if (!this.models.has(f)) throw new Error(`model ${m.id} names fallback ${f}, which no provider declares`);
        if (f === m.id) throw new Error(`model ${m.id} names itself as a fallback`);
      }
    }
  }

  static empty(): ProviderCatalog {
    return new ProviderCatalog([]);
  }

  model(id: string): CatalogModel | undefined {
    return this.models.get(id);
  }

  provider(name: string): CatalogProvider {
    const p = this.providers.get(name);
    if (!p) throw new Error(`unknown provider ${name}`);
    return p;
  }

  /** Models a key of `plan` may use, optionally only those of one kind. */
  modelsFor(plan: string | null, kind?: ModelKind): CatalogModel[] {
    return [...this.models.values()].filter(
      (m) => (kind === undefined || m.kind === kind) && (plan === null || mayUse(m, plan))
    );
  }

  /** The chain of models to try for `id`: the model itself, then its fallbacks (each once, in order). */
  chain(id: string): CatalogModel[] {
    const first = this.models.get(id);
    if (!first) return [];
    const seen = new Set([first.id]);
    const out = [first];
    for (const f of first.fallbacks) {
      if (seen.has(f)) continue;
      seen.add(f);
      out.push(this.models.get(f)!);
    }
    return out;
  }
}

export const mayUse = (model: CatalogModel, plan: string): boolean =>
  model.plans === null || model.plans.includes(plan);
