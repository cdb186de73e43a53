/**
 * The federation's shared vocabulary: node states, brand codes, the bodies nodes send (registration, heartbeat,
 * task submission) and what each node state may do. Pure: used by the API, the activities and the workflows.
 */
import { z } from 'zod';
import { didSchema, humanText, NODE_ID_MAX_LENGTH } from '../identifiers';

/**
 * Brand codes (docs/federation.md#joining: 'custom' plus ten codes named after model vendors). A node declares the
 * vendor family of the model it runs; 'custom' is for anything else (give the model in brand.model_base).
 */
export const BRAND_CODES = [
  'custom',
  'openai',
  'anthropic',
  'google',
  'meta',
  'mistral',
  'deepseek',
  'qwen',
  'zhipu',
  'moonshot',
  'baidu'
] as const;
export type BrandCode = (typeof BRAND_CODES)[number];

/**
 * Node lifecycle states (owned by the node/<node_id> workflow; docs/federation.md#node-lifecycle-workflow-nodenode_id):
 *   pending_review → online | offline (approved; online when a heartbeat was seen within NODE_OFFLINE_AFTER_S)
 *   pending_review → rejected (terminal)
 *   online → offline (no heartbeat for NODE_OFFLINE_AFTER_S) → online (next heartbeat)
 *   online | offline → rejected (a reviewer revokes an approved node; terminal)
 */
export const NODE_STATES = ['pending_review', 'online', 'offline', 'rejected'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/** What a node in each state may do. Pending nodes may heartbeat (so reviewers see them alive) but not act. */
export const NODE_PERMISSIONS: Record<NodeState, { heartbeat: boolean; propose: boolean; claimTasks: boolean }> = {
  pending_review: { heartbeat: true, propose: false, claimTasks: false },
  online: { heartbeat: true, propose: true, claimTasks: true },
  offline: { heartbeat: true, propose: true, claimTasks: false },
  rejected: { heartbeat: false, propose: false, claimTasks: false }
};

/** Node ids: ext-<system>-<sequence>, e.g. ext-openai-000123; system is the brand code, the sequence is hub-wide. */
export const NODE_ID_PATTERN = /^ext-[a-z0-9]+-\d{6,}$/;
export const formatNodeId = (brand: BrandCode, sequence: number): string =>
  `ext-${brand}-${String(sequence).padStart(6, '0')}`;
export const nodeIdParam = z
  .string()
  .max(NODE_ID_MAX_LENGTH)
  .regex(NODE_ID_PATTERN, 'a node id such as ext-custom-000001');

const shortText = (max: number) => humanText(max);

/**
 * Every known figure has an upper bound: the dashboard adds them up over all nodes, and a sum must stay a finite
 * number (two heartbeats reporting 1e308 would otherwise make the total Infinity, which JSON cannot carry).
 */
const MAX_MEMORY_GB = 1_000_000;
const MAX_LATENCY_MS = 3_600_000;

export const registrationBody = z
  .object({
    name: shortText(120),
    brand: z
      .object({
        code: z.enum(BRAND_CODES).default('custom'),
        model_base: humanText(120, { min: 0 }).optional()
      })
      .strict(),
    instance: z
      .object({
        os: humanText(120, { min: 0 }).optional(),
        cpu: humanText(120, { min: 0 }).optional(),
        memory_gb: z.number().min(0).max(MAX_MEMORY_GB).optional(),
        gpu: humanText(200, { min: 0 }).optional()
      })
      .strict()
      .optional(),
    capabilities: z
      .object({ declared: z.array(shortText(80)).max(64).default([]) })
      .strict()
      .optional(),
    did: didSchema
      .optional()
      .describe(
        'the node identity: a registered, unrevoked DID linked to no node yet, linked to this node (X-DID alone then authenticates as it); 400 when it is unknown or revoked, 409 when it is linked to another node'
      )
  })
  .strict();
export type RegistrationBody = z.infer<typeof registrationBody>;

const percent = z.number().min(0).max(100);
const knownResources = {
  cpu_percent: percent.optional(),
  memory_used_gb: z.number().min(0).max(MAX_MEMORY_GB).optional(),
  memory_total_gb: z.number().min(0).max(MAX_MEMORY_GB).optional(),
  gpu_count: z.number().int().min(0).max(1024).optional(),
  gpu_util_percent: percent.optional()
};
/**
 * A node's task counters reach at most this (10^12): well inside what a double carries exactly, so a value just past
 * the bound is a different number on every client (at 2^53 - 1, a generated "one more" was not).
 */
const MAX_TASK_COUNT = 1_000_000_000_000;
const knownPerformance = {
  latency_ms: z.number().min(0).max(MAX_LATENCY_MS).optional(),
  tasks_done: z.number().int().min(0).max(MAX_TASK_COUNT).optional(),
  tasks_failed: z.number().int().min(0).max(MAX_TASK_COUNT).optional()
};

/**
 * Figures a node reports that the hub does not know (yet): kept per sample in `extra`, bounded, so new node software
 * that reports one more figure never has its heartbeat refused. Values must be scalars (a finite number, a boolean,
 * null, or a string of at most HEARTBEAT_EXTRA_MAX_STRING characters); at most HEARTBEAT_EXTRA_MAX_MEMBERS members
 * and HEARTBEAT_EXTRA_MAX_BYTES of JSON are kept. Anything else is ignored and named in the answer's `ignored_fields`.
 */
export const HEARTBEAT_EXTRA_MAX_MEMBERS = 32;
export const HEARTBEAT_EXTRA_MAX_BYTES = 4096;
export const HEARTBEAT_EXTRA_MAX_STRING = 200;
export type ExtraFigure = number | string | boolean | null;

function splitExtras(
  input: {
    resources: Record<string, unknown>;
    performance: Record<string, unknown>;
    extra?: Record<string, unknown>;
  } & Record<string, unknown>
) {
  const candidates: [string, unknown][] = [];
  const known = <K extends string>(group: Record<string, unknown>, names: Record<K, unknown>, prefix: string) => {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(group)) {
      if (Object.hasOwn(names, name)) out[name] = value;
      else candidates.push([`${prefix}${name}`, value]);
    }
    return out;
  };
  const resources = known(input.resources, knownResources, 'resources.');
  const performance = known(input.performance, knownPerformance, 'performance.');
  for (const [name, value] of Object.entries(input)) {
    if (name === 'resources' || name === 'performance') continue;
    if (name === 'extra' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [inner, v] of Object.entries(value)) candidates.push([inner, v]);
    } else {
      candidates.push([name, value]);
    }
  }
  const extra: Record<string, ExtraFigure> = {};
  const ignored: string[] = [];
  let bytes = 2;
  for (const [name, value] of candidates) {
    const scalar =
      value === null ||
      typeof value === 'boolean' ||
      (typeof value === 'number' && Number.isFinite(value)) ||
      (typeof value === 'string' && value.length <= HEARTBEAT_EXTRA_MAX_STRING);
    const size = JSON.stringify(name).length + JSON.stringify(value ?? null).length + 2;
    if (
      !scalar ||
      name.length > 100 ||
      Object.keys(extra).length >= HEARTBEAT_EXTRA_MAX_MEMBERS ||
      bytes + size > HEARTBEAT_EXTRA_MAX_BYTES ||
      Object.hasOwn(extra, name)
    ) {
      ignored.push(name);
      continue;
    }
    extra[name] = value as ExtraFigure;
    bytes += size;
  }
  return {
    resources: resources as { [K in keyof typeof knownResources]?: number },
    performance: performance as { [K in keyof typeof knownPerformance]?: number },
    extra,
    ignored
  };
}

/**
 * A heartbeat is liveness first: every member is optional, the known figures are validated, unknown ones are kept
 * in `extra` (bounded) or ignored, never refused.
 */
export const heartbeatBody = z
  .object({
    resources: z.object(knownResources).catchall(z.unknown()).default({}),
    performance: z.object(knownPerformance).catchall(z.unknown()).default({})
  })
  .catchall(z.unknown())
  .transform(splitExtras);
export type HeartbeatBody = z.output<typeof heartbeatBody>;

/** One recorded heartbeat sample (the latest per node, and the bounded history). */
export interface HeartbeatSample {
  at: string;
  resources: HeartbeatBody['resources'];
  performance: HeartbeatBody['performance'];
  /** Figures the hub does not know, when the node sent any (bounded, see HEARTBEAT_EXTRA_MAX_MEMBERS). */
  extra?: Record<string, ExtraFigure>;
}

/**
 * Task states: queued → claimed (a worker node holds a lease) → done | failed; a claim whose lease lapses goes back
 * to queued. POST /a2a/task creates queued tasks; worker nodes claim them through /api/task/assign.
 * input_required: the claiming node asked its submitter for more (A2A's TASK_STATE_INPUT_REQUIRED); no lease runs
 * while it waits, and the submitter's next message hands it back to the same node, claimed under a new lease.
 * canceled: by its submitter (A2A CancelTask); a claimed task's node hears it at its next progress call.
 */
export const TASK_STATES = ['queued', 'claimed', 'input_required', 'done', 'failed', 'canceled'] as const;
export type TaskState = (typeof TASK_STATES)[number];

export const taskBody = z
  .object({
    type: z
      .string()
      .regex(/^[a-z][a-z0-9_.-]{0,63}$/, 'a task type such as inference.chat (lower case, digits, _ . -)'),
    payload: z.record(z.string(), z.unknown()).default({}),
    required_capabilities: z.array(shortText(80)).max(32).default([]),
    priority: z.number().int().min(0).max(9).default(5)
  })
  .strict();
export type TaskBody = z.infer<typeof taskBody>;
