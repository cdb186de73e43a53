/**
 * The members A2A v1.0 defines for a Message and its Parts (a2a.proto: Message, Part), in their JSON names. The
 * binding keeps these alone: a client's other members are neither stored nor served back, so the Task.history
 * the hub answers stays valid against the schema (api/routes/discovery/a2a-binding.schema.ts strips them from what
 * is sent; documentedMessage() from what was stored before it did).
 */

export const MESSAGE_MEMBERS = [
  'messageId',
  'contextId',
  'taskId',
  'role',
  'parts',
  'metadata',
  'extensions',
  'referenceTaskIds'
] as const;

/** A Part: one of text, raw, url or data, and its metadata, filename and media type. */
export const PART_MEMBERS = ['text', 'raw', 'url', 'data', 'metadata', 'filename', 'mediaType'] as const;

const pick = (value: Record<string, unknown>, members: readonly string[]) =>
  Object.fromEntries(members.filter((m) => value[m] !== undefined).map((m) => [m, value[m]]));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A stored message with only the documented members, its parts likewise. */
export function documentedMessage(message: Record<string, unknown>): Record<string, unknown> {
  const out = pick(message, MESSAGE_MEMBERS);
  if (Array.isArray(out.parts)) out.parts = out.parts.filter(isObject).map((part) => pick(part, PART_MEMBERS));
  return out;
}
