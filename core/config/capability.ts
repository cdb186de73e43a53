/**
 * A capability's slice of the configuration: its settings (one zod object, every setting described), the processes
 * that read them and the docs page that explains them. core/config.node.ts composes the slices into the whole
 * schema; docs/configuration.md is generated from them (npm run docs:config).
 */
import type { z } from 'zod';

/**
 * The processes of the service: the API (every listener, the local daemon's included), the Temporal worker, the
 * launcher (`npm start`: the embedded stack and nginx, then the API and the worker), and the operator tools
 * (`npm run admin`, `npm run daemon:verify`).
 */
export const PROCESSES = ['api', 'worker', 'launcher', 'tools'] as const;
export type ProcessKind = (typeof PROCESSES)[number];

/** What a setting may carry besides its description (zod's `.meta()`): who reads it when not the whole slice, and
 * its allowed values in words when a pattern says them (ranges and enums are read from the schema). */
export type SettingMeta = {
  readBy?: readonly ProcessKind[];
  allowed?: string;
};

export interface Capability<Shape extends z.ZodRawShape> {
  /** Short name, also the name of the slice's type (e.g. `ledger` → LedgerConfig). */
  name: string;
  title: string;
  /** The capability's page under docs/, or null when it has none of its own. */
  page: string | null;
  /** The processes reading every setting of the slice, unless a setting's `readBy` says otherwise. */
  readBy: readonly ProcessKind[];
  schema: z.ZodObject<Shape>;
}

export function defineCapability<Shape extends z.ZodRawShape>(capability: Capability<Shape>): Capability<Shape> {
  return capability;
}

/** Metadata of one setting (`.meta(setting({ readBy: [...] }))`), typed. */
export function setting(meta: SettingMeta): SettingMeta {
  return meta;
}
