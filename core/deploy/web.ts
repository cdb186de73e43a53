/**
 * The deploy capability's pure rules: target and release names, file paths confined to a release, the layout under
 * DATA_DIR/deploy, and the nginx configuration the hub's own nginx runs with. No I/O: the launcher
 * (scripts/stack/nginx.ts) writes the config, the commands-queue activities (activities/deploy/) use the layout.
 */

/** A deploy target is one URL path segment: /<target>/ on the web port. */
export const TARGET_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** Release ids sort by time: r<yyyymmddThhmmssSSS>-<8 hex>. */
export const RELEASE_PATTERN = /^r\d{8}T\d{9}-[0-9a-f]{8}$/;
/** A file path inside a release: relative segments of safe characters, no dot-segments, no hidden files. */
export const FILE_PATH_PATTERN = /^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}\/){0,7}[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/;
export const MAX_FILES = 32;
export const MAX_FILE_BYTES = 128 * 1024;
export const MAX_RELEASE_BYTES = 512 * 1024;
/** The file `content` alone becomes. */
export const DEFAULT_FILE = 'index.html';

export function releaseId(at: Date, random8hex: string): string {
  const stamp = at.toISOString().replace(/[-:.Z]/g, '');
  return `r${stamp}-${random8hex}`;
}

/** Every path the deploy capability uses, under DATA_DIR/deploy. Joined with '/', so this stays pure. */
export function deployLayout(dataDir: string) {
  const root = `${dataDir.replace(/\/+$/, '')}/deploy`;
  const nginx = `${root}/nginx`;
  return {
    root,
    nginxPrefix: nginx,
    nginxConf: `${nginx}/nginx.conf`,
    nginxPid: `${nginx}/nginx.pid`,
    nginxErrorLog: `${nginx}/logs/error.log`,
    /** The hub's `listen` line, included by every fragment server block (written with nginx.conf). */
    listenConf: `${nginx}/listen.conf`,
    /** Rendered fragments: <target>.location.conf (in the hub's server) and <target>.server.conf (in http). */
    confD: `${nginx}/conf.d`,
    fragmentLocations: (t: string) => `${nginx}/conf.d/${t}.location.conf`,
    fragmentServers: (t: string) => `${nginx}/conf.d/${t}.server.conf`,
    /** The config generation nginx answers at CONFIG_GENERATION_PATH (no target name starts with _). */
    configGeneration: `${nginx}/conf.d/_generation.location.conf`,
    /** A target's stored fragment, as submitted (the `config` action). */
    fragmentSource: (t: string) => `${root}/targets/${t}/nginx.fragment.conf`,
    /** Copies of the files a config change replaces, kept until it is reloaded or restored. */
    configBackup: (op: string) => `${nginx}/backup-${op}`,
    targets: `${root}/targets`,
    target: (t: string) => `${root}/targets/${t}`,
    releases: (t: string) => `${root}/targets/${t}/releases`,
    release: (t: string, r: string) => `${root}/targets/${t}/releases/${r}`,
    current: (t: string) => `${root}/targets/${t}/current`,
    /** Releases marked bad: one empty file per release id, outside the served tree. */
    bad: (t: string) => `${root}/targets/${t}/bad`
  };
}

/** Where the hub's nginx answers the id of the config change it runs with: a reload is confirmed by reading it. */
export const CONFIG_GENERATION_PATH = '/_hub/config-generation';

export function renderGenerationLocation(operationId: string): string {
  return `location = ${CONFIG_GENERATION_PATH} { default_type text/plain; return 200 "${operationId.replace(/[^A-Za-z0-9_-]/g, '')}"; }\n`;
}

/** The `nginx -p/-c/-e` flags every nginx command of the hub uses, so none touches a system nginx. */
export function nginxFlags(dataDir: string): string[] {
  const l = deployLayout(dataDir);
  return ['-p', `${l.nginxPrefix}/`, '-c', l.nginxConf, '-e', l.nginxErrorLog];
}

/**
 * The whole nginx.conf: one server on host:port serving /<target>/<path> from targets/<target>/current/<path>
 * (the symlink is resolved per request, so switching `current` is seen at once); every pid, log and temp path is
 * inside the prefix. `runAsRoot`: workers must read a 0700 data dir, so a root launcher keeps them as root.
 */
export function nginxListen(host: string, port: number): string {
  return host === '0.0.0.0' || host === '::' ? `${port}` : `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export function renderNginxConf(opts: { dataDir: string; host: string; port: number; runAsRoot: boolean }): string {
  const l = deployLayout(opts.dataDir);
  const listen = nginxListen(opts.host, opts.port);
  return [
    '# Written by zhongshu-hub at every start (core/deploy/web.ts); edits are lost.',
    ...(opts.runAsRoot ? ['user root;'] : []),
    'worker_processes 1;',
    `pid ${l.nginxPid};`,
    `error_log ${l.nginxErrorLog} warn;`,
    'events { worker_connections 256; }',
    'http {',
    `  access_log ${l.nginxPrefix}/logs/access.log;`,
    `  client_body_temp_path ${l.nginxPrefix}/temp/body;`,
    `  proxy_temp_path ${l.nginxPrefix}/temp/proxy;`,
    `  fastcgi_temp_path ${l.nginxPrefix}/temp/fastcgi;`,
    `  uwsgi_temp_path ${l.nginxPrefix}/temp/uwsgi;`,
    `  scgi_temp_path ${l.nginxPrefix}/temp/scgi;`,
    '  types { text/html html htm; text/css css; application/javascript js; application/json json; text/plain txt; image/svg+xml svg; image/png png; }',
    '  default_type application/octet-stream;',
    '  server_tokens off;',
    // Each target's stored config fragment (core/deploy/fragment.ts): its server blocks here, its locations below.
    `  include ${l.confD}/*.server.conf;`,
    '  server {',
    // default_server: a fragment's server block (included above, so earlier) must never become the default host.
    `    listen ${listen} default_server;`,
    '    location = / { return 200 "zhongshu-hub deploy web\\n"; }',
    `    include ${l.confD}/*.location.conf;`,
    `    location ~ "^/([a-z0-9][a-z0-9_-]{0,62})/(.*)$" { alias ${l.targets}/$1/current/$2; index index.html; }`,
    '  }',
    '}',
    ''
  ].join('\n');
}
