/**
 * What the schema says about one setting, in words for docs/configuration.md: its default, its allowed values
 * (number ranges, enums, URL kinds and lengths read from the zod checks; a setting's `allowed` meta where a pattern
 * or a list says it), and the processes that read it.
 */
import type { z } from 'zod';
import type { ProcessKind, SettingMeta } from '../../core/config/capability';

export interface SettingFacts {
  description: string;
  /** The default as the environment would spell it, or null when unset by default. */
  default: string | null;
  allowed: string;
  readBy: readonly ProcessKind[];
}

// The parts of zod's internal definitions read here (zod 4: schema._zod.def).
interface Def {
  type: string;
  innerType?: Schema;
  defaultValue?: unknown;
  in?: Schema;
  checks?: { _zod: { def: CheckDef } }[];
  entries?: Record<string, string>;
  format?: string;
  protocol?: RegExp;
}
interface CheckDef {
  check: string;
  value?: number;
  inclusive?: boolean;
  format?: string;
  minimum?: number;
}
type Schema = { _zod: { def: Def } };

export function settingFacts(name: string, schema: z.ZodType, fallbackReadBy: readonly ProcessKind[]): SettingFacts {
  const meta = (schema.meta() ?? {}) as SettingMeta & { description?: string };
  if (!meta.description) throw new Error(`${name} has no description: add .describe() to its schema`);
  let node = schema as unknown as Schema;
  let fallback: unknown;
  for (;;) {
    const def = node._zod.def;
    if (def.type === 'default') {
      fallback = def.defaultValue;
      node = def.innerType!;
    } else if (def.type === 'optional') node = def.innerType!;
    else if (def.type === 'pipe') node = def.in!;
    else break;
  }
  return {
    description: meta.description,
    default: fallback === undefined ? null : Array.isArray(fallback) ? fallback.join(',') : String(fallback),
    allowed: meta.allowed ?? allowedValues(node._zod.def),
    readBy: meta.readBy ?? fallbackReadBy
  };
}

function allowedValues(def: Def): string {
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  if (def.type === 'enum') return Object.values(def.entries ?? {}).join(', ');
  if (def.type === 'number') {
    const integer = checks.some((c) => c.check === 'number_format' && /int/.test(c.format ?? ''));
    let low: number | null = null;
    let high: number | null = null;
    for (const c of checks) {
      if (c.check === 'greater_than') low = c.inclusive ? c.value! : c.value! + (integer ? 1 : Number.EPSILON);
      if (c.check === 'less_than') high = c.inclusive ? c.value! : c.value! - (integer ? 1 : Number.EPSILON);
    }
    const kind = integer ? 'integer' : 'number';
    if (low !== null && high !== null) return `${kind} ${low} to ${high}`;
    if (low !== null) return `${kind} >= ${low}`;
    return kind;
  }
  if (def.type === 'string') {
    if (def.format === 'url') return def.protocol ? 'an http(s) URL' : 'a URL';
    const min = checks.find((c) => c.check === 'min_length')?.minimum ?? 0;
    return min > 1 ? `text of at least ${min} characters` : 'text';
  }
  return def.type;
}
