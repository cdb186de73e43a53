#!/usr/bin/env bash
# Builds the embedded stack's two servers (Temporal CLI dev server, FerretDB) once and caches them
# outside the clone, keyed by version. Prints the path of each binary on its last lines.
# Also installs the Debian packages the service runs (see install_packages).
# Usage: scripts/install-tools.sh [temporal|ferretdb|temporal-server|temporal-ui|nginx|postgresql|all]
#        or `packages <name>...`
# (`all`: both packages and both servers; `temporal-server` and `temporal-ui`, the real Temporal server and its Web UI
# for a cluster (docs/operations.md#a-real-temporal-cluster), are built only when asked for)
set -euo pipefail

TEMPORAL_VERSION="v1.5.1"
FERRETDB_VERSION="v1.24.2"
# The Temporal server and Web UI server the CLI above embeds (its go.mod requires these versions).
TEMPORAL_SERVER_VERSION="v1.29.1"
TEMPORAL_UI_VERSION="v2.42.1"
TOOLS_DIR="${ZHONGSHU_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zhongshu-hub/tools}"

log() { printf '[install-tools] %s\n' "$*" >&2; }

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed. Install Go >= 1.25 (https://go.dev/dl) or set TEMPORAL_ADDRESS and MONGODB_URI to use servers you run yourself."
    exit 1
  fi
}

build() { # name module version
  local name="$1" module="$2" version="$3"
  local dir="$TOOLS_DIR/$name-$version"
  local bin="$dir/$name"
  if [ -x "$bin" ]; then
    log "$name $version: cached at $bin"
    return 0
  fi
  need_go
  mkdir -p "$dir"
  log "$name $version: building with 'go install $module@$version' (first time only, takes a few minutes)..."
  local started=$SECONDS
  # Build into a temp dir and move into place, so an interrupted build never leaves a half binary in the cache.
  local tmp
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  ( GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" go install -v "$module@$version" 2>&1 | while read -r line; do log "  $name: $line"; done ) || true
  # A binary that does not run is no build: FerretDB's module lacks its generated build/version/version.txt, so
  # `go install` of it succeeds and the binary panics at its first start.
  if [ -x "$tmp/$name" ] && ! "$tmp/$name" --version >/dev/null 2>&1; then
    log "$name $version: the binary 'go install' built does not run ($name --version failed)"
    rm -f "$tmp/$name"
  fi
  if [ ! -x "$tmp/$name" ]; then
    # Some module proxies refuse the version list that `go install pkg@version` reads for its deprecation check.
    # Fall back to the same source built in place: download the module at that exact version and build it.
    log "$name $version: no working binary from 'go install'; building from the downloaded module instead..."
    build_from_module "$module" "$version" "$tmp/$name" || true
  fi
  if [ ! -x "$tmp/$name" ]; then
    rm -rf "$tmp"
    log "$name $version: build FAILED. Check that Go >= 1.25 is installed and the Go module proxy is reachable, then run 'npm run stack:install' again."
    exit 1
  fi
  if ! "$tmp/$name" --version >/dev/null 2>&1; then
    rm -rf "$tmp"
    log "$name $version: build FAILED: the built binary does not run ($name --version)."
    exit 1
  fi
  mv "$tmp/$name" "$bin"
  rm -rf "$tmp"
  log "$name $version: built in $((SECONDS - started))s -> $bin"
}

# build_from_module <package path> <version> <output>: `go mod download` the module holding the package, copy
# it to a scratch dir and `go build` there with its own go.mod and go.sum (module and package path are found by
# trimming /cmd/...). A copy, because some modules (FerretDB) expect a generated build/version/version.txt.
build_from_module() {
  local pkg="$1" version="$2" out="$3"
  local mod="${pkg%%/cmd/*}"
  local rel="./${pkg#"$mod"/}"
  local dir src
  dir=$( (cd "$(mktemp -d)" && go mod init zhongshu-tools >/dev/null 2>&1 && go mod download -json "$mod@$version") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -d "$dir" ] || { log "  could not download $mod@$version"; return 1; }
  src=$(mktemp -d)
  cp -r "$dir/." "$src/" && chmod -R u+w "$src"
  if [ -d "$src/build/version" ] && [ ! -s "$src/build/version/version.txt" ]; then
    echo "$version" > "$src/build/version/version.txt"
  fi
  ( cd "$src" && go build -trimpath -v -o "$out" "$rel" 2>&1 | while read -r line; do log "  $(basename "$out"): $line"; done )
  rm -rf "$src"
}

# build_temporal_server: the real Temporal server (go.temporal.io/server/cmd/server) and its SQL schema tool
# (cmd/tools/sql) at TEMPORAL_SERVER_VERSION, with the module's PostgreSQL schema files beside them (the tool reads
# them from disk), into $TOOLS_DIR/temporal-server-<version>/{temporal-server,temporal-sql-tool,schema/}. As the other
# builds: cached, and moved into place only once both binaries run, so an interrupted build leaves nothing behind.
build_temporal_server() {
  local version="$TEMPORAL_SERVER_VERSION" mod="go.temporal.io/server"
  local dir="$TOOLS_DIR/temporal-server-$version"
  if [ -x "$dir/temporal-server" ] && [ -x "$dir/temporal-sql-tool" ] && [ -d "$dir/schema/postgresql/v12" ]; then
    log "temporal-server $version: cached at $dir/temporal-server"
    log "temporal-sql-tool $version: cached at $dir/temporal-sql-tool"
    return 0
  fi
  need_go
  mkdir -p "$TOOLS_DIR"
  log "temporal-server $version: building with 'go build $mod/cmd/server and cmd/tools/sql' (first time only, takes a few minutes)..."
  local started=$SECONDS tmp src
  tmp=$(mktemp -d "$TOOLS_DIR/.temporal-server-build.XXXXXX")
  src=$( (cd "$(mktemp -d)" && go mod init zhongshu-tools >/dev/null 2>&1 && go mod download -json "$mod@$version") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    rm -rf "$tmp"
    log "temporal-server $version: could not download $mod@$version from the Go module proxy"
    exit 1
  fi
  # Built inside the module's own directory (read-only in the module cache; `go build -o` writes elsewhere), with its
  # own go.mod and go.sum: the same dependency versions as the release.
  local ok=1
  for pair in "temporal-server ./cmd/server" "temporal-sql-tool ./cmd/tools/sql"; do
    set -- $pair
    ( cd "$src" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -v -o "$tmp/$1" "$2" 2>&1 | while read -r line; do log "  temporal-server: $line"; done ) || true
    if [ ! -x "$tmp/$1" ] || ! "$tmp/$1" --help >/dev/null 2>&1; then ok=0; log "temporal-server $version: $1 did not build or does not run"; fi
  done
  if [ "$ok" != 1 ]; then
    rm -rf "$tmp"
    log "temporal-server $version: build FAILED. Check that Go >= 1.25 is installed and the Go module proxy is reachable."
    exit 1
  fi
  mkdir -p "$tmp/schema/postgresql"
  cp -r "$src/schema/postgresql/v12" "$tmp/schema/postgresql/" && chmod -R u+w "$tmp/schema"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  log "temporal-server $version: built in $((SECONDS - started))s -> $dir/temporal-server"
  log "temporal-sql-tool $version: built -> $dir/temporal-sql-tool"
}

# build_temporal_ui: Temporal's Web UI server (github.com/temporalio/ui-server/v2/cmd/server, its assets embedded),
# the UI the CLI's dev server serves, as a server of its own for a real cluster (docs/operations.md#the-web-ui), into
# $TOOLS_DIR/temporal-ui-<version>/temporal-ui. Cached and atomic as the other builds.
build_temporal_ui() {
  local version="$TEMPORAL_UI_VERSION" mod="github.com/temporalio/ui-server/v2"
  local dir="$TOOLS_DIR/temporal-ui-$version"
  if [ -x "$dir/temporal-ui" ]; then
    log "temporal-ui $version: cached at $dir/temporal-ui"
    return 0
  fi
  need_go
  mkdir -p "$TOOLS_DIR"
  log "temporal-ui $version: building with 'go build $mod/cmd/server' (first time only)..."
  local started=$SECONDS tmp src
  tmp=$(mktemp -d "$TOOLS_DIR/.temporal-ui-build.XXXXXX")
  src=$( (cd "$(mktemp -d)" && go mod init zhongshu-tools >/dev/null 2>&1 && go mod download -json "$mod@$version") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -n "$src" ] && [ -d "$src" ]; then
    ( cd "$src" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -v -o "$tmp/temporal-ui" ./cmd/server 2>&1 | while read -r line; do log "  temporal-ui: $line"; done ) || true
  fi
  if [ ! -x "$tmp/temporal-ui" ] || ! "$tmp/temporal-ui" --help >/dev/null 2>&1; then
    rm -rf "$tmp"
    log "temporal-ui $version: build FAILED. Check that Go >= 1.25 is installed and the Go module proxy is reachable."
    exit 1
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  log "temporal-ui $version: built in $((SECONDS - started))s -> $dir/temporal-ui"
}

# The Debian packages the service runs: PostgreSQL's server binaries (FerretDB stores in a PostgreSQL child server,
# scripts/stack/postgres.ts) and nginx (deploy targets, scripts/stack/nginx.ts). `npm start` runs this for the ones it
# needs; each missing one is installed with one line saying why, by one `apt-get update` and one `apt-get install -y`.
# The probed paths follow the launcher's: NGINX_BIN (/usr/sbin/nginx), PG_BIN_DIR (else /usr/lib/postgresql/*/bin).
# Debian's packages may also create and start a system nginx or cluster: the hub never uses them.
# Exit codes: 0 every package there (or installed, or ZHONGSHU_INSTALL_PACKAGES=0: the launcher then stops itself
# where PostgreSQL is missing); 77 missing and this user may not install packages (not root, no passwordless sudo):
# the one command to run is printed; 69 missing and no apt-get; 1 apt-get failed.
EX_NOPERM=77
EX_UNAVAILABLE=69

package_present() { # debian package name
  case "$1" in
    nginx) [ -x "${NGINX_BIN:-/usr/sbin/nginx}" ] ;;
    postgresql)
      if [ -n "${PG_BIN_DIR:-}" ]; then [ -x "$PG_BIN_DIR/postgres" ]; else compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; fi ;;
    *) return 1 ;;
  esac
}

package_why() {
  case "$1" in
    nginx) echo "serves the deploy targets (deployment arbitration); without it deploys answer 503" ;;
    postgresql) echo "PostgreSQL server binaries: the embedded FerretDB stores the hub's data in a PostgreSQL server of its own" ;;
  esac
}

install_packages() { # debian package names
  local missing=() name
  for name in "$@"; do
    if package_present "$name"; then log "$name: installed"; else missing+=("$name"); fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local command="sudo apt-get install -y ${missing[*]}"
  # Only nginx can be done without (deploys answer 503); the embedded FerretDB stores in PostgreSQL.
  local otherwise="set ZHONGSHU_INSTALL_PACKAGES=0 to start without them"
  if [[ " ${missing[*]} " == *" postgresql "* ]]; then
    otherwise="set MONGODB_URI to a MongoDB of your own: the embedded FerretDB cannot start without PostgreSQL"
  fi
  if [ "${ZHONGSHU_INSTALL_PACKAGES:-1}" = 0 ]; then
    log "ZHONGSHU_INSTALL_PACKAGES=0: not installing ${missing[*]} (to install: $command)"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing: ${missing[*]}, and this system has no apt-get: install them with its package manager, or $otherwise"
    exit $EX_UNAVAILABLE
  fi
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo=(sudo); else
      log "missing: ${missing[*]}, and this user may not install packages. Run this once, then start again:"
      log "  $command"
      log "(or $otherwise)"
      exit $EX_NOPERM
    fi
  fi
  for name in "${missing[@]}"; do log "installing $name: $(package_why "$name")"; done
  log "running: ${sudo[*]:+${sudo[*]} }apt-get update, then apt-get install -y ${missing[*]}"
  local out
  out=$(mktemp)
  if ! "${sudo[@]}" apt-get update -q >"$out" 2>&1 ||
    ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >>"$out" 2>&1; then
    tail -n 20 "$out" | while read -r line; do log "  apt-get: $line"; done
    rm -f "$out"
    log "installing ${missing[*]} failed (its last lines above); run: $command"
    exit 1
  fi
  rm -f "$out"
  for name in "${missing[@]}"; do
    if ! package_present "$name"; then
      log "apt-get installed $name, but it is still missing where the launcher looks (NGINX_BIN, PG_BIN_DIR)"
      exit 1
    fi
  done
  log "installed: ${missing[*]}"
}

what="${1:-all}"
case "$what" in
  temporal) build temporal github.com/temporalio/cli/cmd/temporal "$TEMPORAL_VERSION" ;;
  ferretdb) build ferretdb github.com/FerretDB/FerretDB/cmd/ferretdb "$FERRETDB_VERSION" ;;
  temporal-server) build_temporal_server ;;
  temporal-ui) build_temporal_ui ;;
  all)
    install_packages postgresql nginx
    build temporal github.com/temporalio/cli/cmd/temporal "$TEMPORAL_VERSION"
    build ferretdb github.com/FerretDB/FerretDB/cmd/ferretdb "$FERRETDB_VERSION"
    ;;
  nginx | postgresql) install_packages "$what" ;;
  packages)
    shift
    for name in "$@"; do case "$name" in nginx | postgresql) ;; *) log "unknown package '$name' (nginx, postgresql)"; exit 2 ;; esac; done
    install_packages "$@"
    ;;
  *) log "unknown tool '$what' (temporal, ferretdb, temporal-server, temporal-ui, nginx, postgresql, packages <name>... or all)"; exit 2 ;;
esac
