/**
 * HTTP Message Signatures (RFC 9421) with Ed25519, and Content-Digest (RFC 9530), as the partner channels use them
 * (docs/partner.md): parsing Signature-Input / Signature, building the signature base, verifying a
 * partner's request signature and signing the hub's answers. Only what the channels need: one signature per
 * message, components `@method`, `@path`, `@query`, `@authority`, `@status` and header fields (no component
 * parameters such as `;req` or `;sf`), parameters `created`, `expires`, `keyid`, `alg`, `nonce`, `tag`.
 */
import { createHash, KeyObject, sign, verify } from 'node:crypto';

export type SignatureParamValue = string | number | boolean;

export interface SignatureInput {
  label: string;
  components: string[];
  /** In the order received (the order is part of the signature base). */
  params: [string, SignatureParamValue][];
}

export class SignatureFormatError extends Error {}

const KEY = /^[a-z*][a-z0-9_\-.*]*/;

/**
 * Parses a Signature-Input field (an RFC 8941 dictionary of inner lists of strings with parameters). Every member is
 * returned; the caller picks the one it verifies.
 */
export function parseSignatureInput(field: string): SignatureInput[] {
  const out: SignatureInput[] = [];
  let s = field.trim();
  const fail = (what: string): never => {
    throw new SignatureFormatError(`Signature-Input: ${what}`);
  };
  while (s.length > 0) {
    const label = KEY.exec(s)?.[0] ?? fail('expected a label');
    s = s.slice(label.length);
    if (!s.startsWith('=(')) fail(`expected =( after ${label}`);
    s = s.slice(2);
    const components: string[] = [];
    for (;;) {
      s = s.replace(/^ +/, '');
      if (s.startsWith(')')) {
        s = s.slice(1);
        break;
      }
      const item =
        /^"([\x20-\x21\x23-\x5b\x5d-\x7e]*)"/.exec(s) ?? fail('components are quoted strings without parameters');
      components.push(item[1]!);
      s = s.slice(item[0].length);
      if (!s.startsWith(' ') && !s.startsWith(')')) fail('components are separated by spaces');
    }
    const params: [string, SignatureParamValue][] = [];
    while (s.startsWith(';')) {
      s = s.slice(1).replace(/^ +/, '');
      const name = KEY.exec(s)?.[0] ?? fail('expected a parameter name');
      s = s.slice(name.length);
      if (!s.startsWith('=')) {
        params.push([name, true]);
        continue;
      }
      s = s.slice(1);
      const str = /^"((?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"/.exec(s);
      const int = /^-?\d{1,15}(?![\d.])/.exec(s);
      const token = /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*/.exec(s);
      if (str) {
        params.push([name, str[1]!.replace(/\\(["\\])/g, '$1')]);
        s = s.slice(str[0].length);
      } else if (int) {
        params.push([name, Number(int[0])]);
        s = s.slice(int[0].length);
      } else if (token) {
        params.push([name, token[0]]);
        s = s.slice(token[0].length);
      } else fail(`bad value of parameter ${name}`);
    }
    out.push({ label, components, params });
    s = s.replace(/^[ \t]*/, '');
    if (s.length === 0) break;
    if (!s.startsWith(',')) fail('members are separated by commas');
    s = s.slice(1).replace(/^[ \t]*/, '');
  }
  if (out.length === 0) fail('empty');
  return out;
}

/** The Signature field's member `label` (an RFC 8941 byte sequence), or null. */
export function signatureBytes(field: string, label: string): Buffer | null {
  for (const member of field.split(',')) {
    const m = /^\s*([a-z*][a-z0-9_\-.*]*)=:([A-Za-z0-9+/]*={0,2}):\s*$/.exec(member);
    if (m && m[1] === label) return Buffer.from(m[2]!, 'base64');
  }
  return null;
}

const serializeParam = ([name, value]: [string, SignatureParamValue]) =>
  value === true
    ? `;${name}`
    : typeof value === 'number'
      ? `;${name}=${value}`
      : `;${name}="${String(value).replace(/(["\\])/g, '\\$1')}"`;

/** The value of `@signature-params`: the inner list serialized as RFC 8941 does. */
export function serializeSignatureParams(input: Pick<SignatureInput, 'components' | 'params'>): string {
  return `(${input.components.map((c) => `"${c}"`).join(' ')})${input.params.map(serializeParam).join('')}`;
}

/** What a message offers to be signed: derived components and header fields (lowercase names). */
export interface MessageComponents {
  method?: string;
  /** The request target as sent: path and query. */
  target?: string;
  authority?: string;
  status?: number;
  headers: Record<string, string | string[] | undefined>;
}

function componentValue(name: string, msg: MessageComponents): string {
  const missing = (): never => {
    throw new SignatureFormatError(`covered component ${name} is not in the message`);
  };
  switch (name) {
    case '@method':
      return msg.method ?? missing();
    case '@path':
      return (msg.target ?? missing()).split('?')[0]!;
    case '@query': {
      const target = msg.target ?? missing();
      const i = target.indexOf('?');
      return i < 0 ? '?' : target.slice(i);
    }
    case '@authority':
      return (msg.authority ?? missing()).toLowerCase();
    case '@status':
      return String(msg.status ?? missing());
    default: {
      if (name.startsWith('@') || name !== name.toLowerCase())
        throw new SignatureFormatError(`unsupported component ${name}`);
      const v = msg.headers[name];
      if (v === undefined) missing();
      return (Array.isArray(v) ? v.map((x) => x.trim()).join(', ') : v!.trim()).replace(/\s*\r?\n\s*/g, ' ');
    }
  }
}

/** The signature base (RFC 9421 §2.5). */
export function signatureBase(input: Pick<SignatureInput, 'components' | 'params'>, msg: MessageComponents): string {
  const seen = new Set<string>();
  const lines = input.components.map((name) => {
    if (seen.has(name)) throw new SignatureFormatError(`component ${name} is covered twice`);
    seen.add(name);
    return `"${name}": ${componentValue(name, msg)}`;
  });
  lines.push(`"@signature-params": ${serializeSignatureParams(input)}`);
  return lines.join('\n');
}

export function verifyEd25519(base: string, signature: Buffer, publicKey: KeyObject): boolean {
  try {
    return verify(null, Buffer.from(base, 'utf8'), publicKey, signature);
  } catch {
    return false;
  }
}

/** Signs a message: the Signature-Input and Signature field values for label `label`. */
export function signMessage(
  label: string,
  input: Pick<SignatureInput, 'components' | 'params'>,
  msg: MessageComponents,
  privateKey: KeyObject
): { signatureInput: string; signature: string } {
  const base = signatureBase(input, msg);
  const sig = sign(null, Buffer.from(base, 'utf8'), privateKey);
  return {
    signatureInput: `${label}=${serializeSignatureParams(input)}`,
    signature: `${label}=:${sig.toString('base64')}:`
  };
}

/** Content-Digest (RFC 9530) with SHA-256 over the bytes. */
export const contentDigest = (body: Buffer | string): string =>
  `sha-256=:${createHash('sha256').update(body).digest('base64')}:`;

/**
 * Checks a Content-Digest field against the body: true when a sha-256 or sha-512 member matches (at least one of
 * them must be present), false when one differs or none is known.
 */
export function contentDigestMatches(field: string, body: Buffer): boolean {
  let known = 0;
  for (const member of field.split(',')) {
    const m = /^\s*(sha-256|sha-512)=:([A-Za-z0-9+/]*={0,2}):\s*$/.exec(member);
    if (!m) continue;
    known++;
    const expected = createHash(m[1] === 'sha-256' ? 'sha256' : 'sha512')
      .update(body)
      .digest('base64');
    if (expected !== m[2]) return false;
  }
  return known > 0;
}
