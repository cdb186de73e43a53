/**
 * Per-target nginx config fragments (the `config` action of POST /dal/deploy): parse, confine, render. Pure.
 *
 * A fragment is a sequence of `location` blocks (merged into the hub's server, which listens on DEPLOY_WEB_PORT)
 * and/or `server` blocks (virtual hosts of their own, on the same port: the hub adds their `listen`). Confinement,
 * checked here before nginx ever reads the text (a refusal is a 400 naming the rule):
 *   - top-level blocks are `location` or `server`, nothing else;
 *   - a location of the hub's server serves only its target's URL space: `/<target>` or `/<target>/…` for prefix,
 *     `=` and `^~` locations, a regex starting `^/<target>/` without `|` for `~`/`~*`; no named (`@`) locations;
 *   - a server block names its hosts (`server_name`, not `_`, `""` or a catch-all) and carries no `listen`;
 *   - `root`/`alias` only as `@current` or `@current/<path>` (the target's current release, substituted by the hub);
 *   - `proxy_pass` only to http://127.0.0.1|localhost:<port> with the port in PORT_POOL; no other upstream (`*_pass`);
 *   - never: include, load_module, listen, files or logs elsewhere (`*_log` other than `access_log off`, `*_path`,
 *     `*_file`, ssl_*), embedded languages (perl*, lua*, js_*), main-context directives (user, pid, env, …).
 * Fragments are at most MAX_FRAGMENT_BYTES and MAX_DIRECTIVES directives, MAX_DEPTH blocks deep.
 */

export const MAX_FRAGMENT_BYTES = 16 * 1024;
export const MAX_DIRECTIVES = 200;
export const MAX_DEPTH = 6;
/** The argument `root`/`alias` may use: the target's current release directory. */
export const CURRENT_PLACEHOLDER = '@current';

export interface Directive {
  name: string;
  args: string[];
  /** Raw argument tokens as written (quotes kept), for rendering. */
  raw: string[];
  block?: Directive[];
  line: number;
}

export class FragmentError extends Error {
  constructor(
    message: string,
    readonly line: number
  ) {
    super(`line ${line}: ${message}`);
    this.name = 'FragmentError';
  }
}

interface Token {
  kind: 'word' | '{' | '}' | ';';
  value: string;
  raw: string;
  line: number;
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\n') {
      line++;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      i++;
    } else if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '{' || c === '}' || c === ';') {
      tokens.push({ kind: c, value: c, raw: c, line });
      i++;
    } else if (c === '"' || c === "'") {
      const start = i;
      const startLine = line;
      let value = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\' && i + 1 < text.length) {
          value += text[i + 1];
          i += 2;
          continue;
        }
        if (text[i] === '\n') line++;
        value += text[i];
        i++;
      }
      if (i >= text.length) throw new FragmentError('unterminated quoted string', startLine);
      i++;
      tokens.push({ kind: 'word', value, raw: text.slice(start, i), line: startLine });
    } else {
      const start = i;
      while (i < text.length && !/[\s{};"'#]/.test(text[i]!)) {
        // ${var}: the braces belong to the word.
        if (text[i] === '$' && text[i + 1] === '{') {
          const end = text.indexOf('}', i);
          if (end < 0) throw new FragmentError('unterminated ${ variable', line);
          i = end + 1;
          continue;
        }
        i++;
      }
      // A quote or # inside a word: refused rather than guessed at.
      if (i < text.length && /["'#]/.test(text[i]!))
        throw new FragmentError(`unexpected ${text[i]} inside a word`, line);
      const word = text.slice(start, i);
      tokens.push({ kind: 'word', value: word, raw: word, line });
    }
  }
  return tokens;
}

function parseTokens(tokens: Token[]): Directive[] {
  let pos = 0;
  let count = 0;
  const parseBlock = (depth: number, closing: boolean): Directive[] => {
    const out: Directive[] = [];
    while (pos < tokens.length) {
      const t = tokens[pos]!;
      if (t.kind === '}') {
        if (!closing) throw new FragmentError('unexpected }', t.line);
        pos++;
        return out;
      }
      if (t.kind !== 'word') throw new FragmentError(`unexpected ${t.value}`, t.line);
      if (++count > MAX_DIRECTIVES) throw new FragmentError(`more than ${MAX_DIRECTIVES} directives`, t.line);
      pos++;
      const args: string[] = [];
      const raw: string[] = [];
      while (pos < tokens.length && tokens[pos]!.kind === 'word') {
        args.push(tokens[pos]!.value);
        raw.push(tokens[pos]!.raw);
        pos++;
      }
      const end = tokens[pos];
      if (!end) throw new FragmentError(`${t.value}: missing ; or {`, t.line);
      if (end.kind === ';') {
        pos++;
        out.push({ name: t.value, args, raw, line: t.line });
      } else if (end.kind === '{') {
        if (depth + 1 > MAX_DEPTH) throw new FragmentError(`blocks nested deeper than ${MAX_DEPTH}`, end.line);
        pos++;
        out.push({ name: t.value, args, raw, line: t.line, block: parseBlock(depth + 1, true) });
      } else {
        throw new FragmentError(`${t.value}: unexpected }`, end.line);
      }
    }
    if (closing) throw new FragmentError('missing }', tokens.at(-1)?.line ?? 1);
    return out;
  };
  return parseBlock(0, false);
}

const MAIN_CONTEXT = new Set([
  'user',
  'pid',
  'env',
  'daemon',
  'master_process',
  'working_directory',
  'lock_file',
  'thread_pool',
  'timer_resolution',
  'pcre_jit',
  'debug_points',
  'ssl_engine',
  'google_perftools_profiles'
]);
const NEVER = new Set([
  'include',
  'load_module',
  'listen',
  'auth_basic_user_file',
  'secure_link_secret',
  'geo',
  'map',
  'split_clients',
  'upstream',
  'http',
  'events',
  'stream',
  'mail',
  'types_hash_max_size',
  'mirror'
]);

/** Why a directive is not allowed in a fragment, or null. */
function refusal(d: Directive, opts: FragmentOptions): string | null {
  const n = d.name;
  if (NEVER.has(n) || MAIN_CONTEXT.has(n)) return `${n} is not allowed in a fragment`;
  if (/^(perl|lua|js_|njs|ssl_|proxy_ssl_|grpc_ssl_|uwsgi_ssl_|worker_|debug_)/.test(n))
    return `${n} is not allowed in a fragment`;
  if (/_log$/.test(n)) {
    if (n === 'access_log' && d.args.length === 1 && d.args[0] === 'off') return null;
    if (n === 'log_not_found' || n === 'log_subrequest') return null;
    return `${n} writes outside the target (only "access_log off;" is allowed)`;
  }
  if (/(_path|_file|_files)$/.test(n) && n !== 'try_files') return `${n} names files outside the target`;
  if (n === 'root' || n === 'alias') {
    const arg = d.args[0] ?? '';
    if (
      d.args.length !== 1 ||
      !(arg === CURRENT_PLACEHOLDER || /^@current\/(?:[A-Za-z0-9_-][A-Za-z0-9._-]*\/?)*$/.test(arg)) ||
      arg.includes('..')
    ) {
      return `${n} may only name ${CURRENT_PLACEHOLDER} or ${CURRENT_PLACEHOLDER}/<path> (the target's current release)`;
    }
    return null;
  }
  if (n === 'proxy_pass') {
    const m = /^http:\/\/(?:127\.0\.0\.1|localhost):(\d{1,5})(\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?$/.exec(
      d.args[0] ?? ''
    );
    const port = m ? Number(m[1]) : NaN;
    if (d.args.length !== 1 || !m || port < opts.poolFirst || port > opts.poolLast) {
      return `proxy_pass may only name http://127.0.0.1:<port> with a port of the pool (${opts.poolFirst}-${opts.poolLast})`;
    }
    return null;
  }
  if (/_pass$/.test(n)) return `${n} is not allowed in a fragment (only proxy_pass to a pool port)`;
  return null;
}

export interface FragmentOptions {
  target: string;
  poolFirst: number;
  poolLast: number;
}

function checkTree(list: Directive[], opts: FragmentOptions, inServer: boolean): void {
  for (const d of list) {
    const why = refusal(d, opts);
    if (why) throw new FragmentError(why, d.line);
    if (d.name === 'server') throw new FragmentError('a server block only at the top level', d.line);
    if (d.name === 'location') checkLocation(d, opts, inServer);
    if (d.block) checkTree(d.block, opts, inServer);
  }
}

function checkLocation(d: Directive, opts: FragmentOptions, inServer: boolean): void {
  if (!d.block) throw new FragmentError('location needs a block', d.line);
  const [first, second] = d.args;
  if (d.args.length < 1 || d.args.length > 2 || first === undefined)
    throw new FragmentError('location takes a path (and a modifier)', d.line);
  const modifier = d.args.length === 2 ? first : '';
  const where = d.args.length === 2 ? second! : first;
  if (!['', '=', '^~', '~', '~*'].includes(modifier))
    throw new FragmentError(`location modifier ${modifier} is not allowed`, d.line);
  if (where.startsWith('@')) throw new FragmentError('named locations are not allowed', d.line);
  if (inServer) return; // A server block of its own serves its own host names: any path.
  const t = opts.target;
  if (modifier === '~' || modifier === '~*') {
    if (!where.startsWith(`^/${t}/`) || where.includes('|'))
      throw new FragmentError(`a regex location must start with ^/${t}/ and have no |`, d.line);
  } else if (!(where === `/${t}` || where.startsWith(`/${t}/`))) {
    throw new FragmentError(`a location must be /${t} or under /${t}/`, d.line);
  }
}

/** Parses and confines a fragment; throws FragmentError (line and rule) when it is refused. */
export function parseFragment(text: string, opts: FragmentOptions): Directive[] {
  if (new TextEncoder().encode(text).length > MAX_FRAGMENT_BYTES)
    throw new FragmentError(`a fragment is at most ${MAX_FRAGMENT_BYTES} bytes`, 1);
  if (text.includes('\0')) throw new FragmentError('NUL character', 1);
  const tree = parseTokens(tokenize(text));
  for (const d of tree) {
    if (d.name === 'location') {
      checkLocation(d, opts, false);
      checkTree(d.block!, opts, false);
    } else if (d.name === 'server') {
      if (!d.block || d.args.length) throw new FragmentError('server takes a block and no arguments', d.line);
      const names = d.block.filter((x) => x.name === 'server_name').flatMap((x) => x.args);
      if (names.length === 0) throw new FragmentError('a server block needs a server_name', d.line);
      const bad = names.find(
        (n) =>
          n === '_' ||
          n === '' ||
          n === '*' ||
          n === '~' ||
          n === 'localhost' ||
          /^\d+\.\d+\.\d+\.\d+$/.test(n) ||
          n.startsWith('~')
      );
      if (bad !== undefined)
        throw new FragmentError(`server_name ${bad || '""'} would catch other targets' requests`, d.line);
      checkTree(d.block, opts, true);
    } else {
      throw new FragmentError(`only location and server blocks at the top level (found ${d.name})`, d.line);
    }
  }
  return tree;
}

function renderList(list: Directive[], indent: string, currentDir: string): string[] {
  const out: string[] = [];
  for (const d of list) {
    const raw =
      d.name === 'root' || d.name === 'alias'
        ? d.args.map((a) => JSON.stringify(currentDir + a.slice(CURRENT_PLACEHOLDER.length)))
        : d.raw;
    const head = [d.name, ...raw].join(' ');
    if (d.block) out.push(`${indent}${head} {`, ...renderList(d.block, `${indent}  `, currentDir), `${indent}}`);
    else out.push(`${indent}${head};`);
  }
  return out;
}

/**
 * The two files a fragment becomes: its locations (included in the hub's server) and its servers (included in
 * http, each given the hub's listen include). `currentDir` is the target's absolute `current` path.
 */
export function renderFragment(
  tree: Directive[],
  opts: { target: string; currentDir: string; listenInclude: string }
): { locations: string; servers: string } {
  const header = `# target ${opts.target}: written by zhongshu-hub from its stored fragment (core/deploy/fragment.ts)\n`;
  const locations = renderList(
    tree.filter((d) => d.name === 'location'),
    '',
    opts.currentDir
  );
  const servers: string[] = [];
  for (const s of tree.filter((d) => d.name === 'server')) {
    servers.push('server {', `  include ${opts.listenInclude};`, ...renderList(s.block!, '  ', opts.currentDir), '}');
  }
  return { locations: header + locations.join('\n') + '\n', servers: header + servers.join('\n') + '\n' };
}
