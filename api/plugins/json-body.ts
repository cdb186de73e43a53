/**
 * JSON in and out, for every listener.
 *   In: the one parser of `application/json` bodies. It refuses, with 400 and a precise code, what the ledger could
 *   not attest exactly or serve back (core/strict-json.ts): invalid UTF-8, a byte order mark, nesting deeper than
 *   JSON_MAX_DEPTH, duplicate member names, lone surrogates, numbers a double cannot carry. A charset other than
 *   UTF-8 is 415. An empty body (no bytes) counts as no body (the route's schema decides whether one is required);
 *   white space alone is invalid JSON.
 *   Out: replies are checked against the route's response schema for their status and serialised by
 *   JSON.stringify, except that RawJson values (stored canonical JSON text) are spliced in as they are, so a read
 *   never re-serialises a stored value.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createSerializerCompiler } from 'fastify-type-provider-zod';
import { AppError } from '../../core/errors';
import { RawJson } from '../../core/raw-json';
import { JsonInputError, parseStrictJson } from '../../core/strict-json';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The charset parameter of a Content-Type, lower-cased, or null when there is none. */
function charsetOf(contentType: string | undefined): string | null {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '');
  return match ? match[1]!.toLowerCase() : null;
}

export function parseJsonBody(body: Buffer, contentType: string | undefined, maxDepth: number): unknown {
  const charset = charsetOf(contentType);
  if (charset !== null && charset !== 'utf-8' && charset !== 'utf8') {
    throw new AppError(
      'unsupported_media_type',
      `JSON bodies must be UTF-8 (RFC 8259 §8.1); charset=${charset} is not accepted`
    );
  }
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    throw new AppError(
      'invalid_json',
      'The body starts with a UTF-8 byte order mark; send JSON without one (RFC 8259 §8.1)',
      { position: 0 }
    );
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new AppError('invalid_utf8', 'The body is not valid UTF-8');
  }
  // Only a body of no bytes is no body. White space alone is not a JSON text (RFC 8259 §2: a value is required), so it
  // is refused below like any other malformed body (schemathesis sent "\n" to a route whose body is optional).
  if (text.length === 0) return undefined;
  try {
    return parseStrictJson(text, maxDepth);
  } catch (err) {
    if (!(err instanceof JsonInputError)) throw err;
    const field = err.path ? `body.${err.path}` : 'body';
    throw new AppError(err.code, err.message, { position: err.position, fields: [{ field, message: err.message }] });
  }
}

/**
 * RawJson values are replaced by a placeholder while JSON.stringify runs, and the placeholders by the raw text
 * after. The placeholder carries a per-process random nonce that never reaches a client, so no string a client
 * stored can be mistaken for one.
 */
const NONCE = randomBytes(16).toString('hex');
const PLACEHOLDER = new RegExp(`"rawjson:${NONCE}:(\\d+)"`, 'g');
let collecting: string[] | null = null;

function rawJsonReplacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  // JSON.stringify has already called toJSON on `value`; the holder still has the RawJson itself.
  const original = this[key];
  if (original instanceof RawJson && collecting) {
    collecting.push(original.text);
    return `rawjson:${NONCE}:${collecting.length - 1}`;
  }
  return value;
}

function withRawJson(stringify: () => string): string {
  const outer = collecting;
  const texts: string[] = [];
  collecting = texts;
  RawJson.splicing++;
  try {
    const json = stringify();
    return texts.length === 0 ? json : json.replace(PLACEHOLDER, (_m, i: string) => texts[Number(i)]!);
  } finally {
    RawJson.splicing--;
    collecting = outer;
  }
}

/** JSON.stringify that splices RawJson values in as their text. */
export function stringifyJson(value: unknown): string {
  return withRawJson(() => JSON.stringify(value, rawJsonReplacer));
}

const zodSerializerCompiler = createSerializerCompiler({
  replacer: rawJsonReplacer as (key: string, value: unknown) => unknown
});

/** The zod type provider's serializer (the reply must match the route's response schema), RawJson-aware. */
export const serializerCompiler: typeof zodSerializerCompiler = (route) => {
  const serialize = zodSerializerCompiler(route);
  return (data: unknown) => withRawJson(() => serialize(data));
};

function jsonBodyPlugin(app: FastifyInstance, opts: { maxDepth: number }): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request: FastifyRequest, body: Buffer, done) => {
    try {
      done(null, parseJsonBody(body, request.headers['content-type'], opts.maxDepth));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // No setReplySerializer here: Fastify would use it instead of the routes' response schemas. Every route declares
  // its responses (api/response-docs.ts refuses one that does not), so replies go through serializerCompiler below.
}

export default fp(jsonBodyPlugin, { name: 'json-body' });
