#!/usr/bin/env bash
# Builds the embedded stack's two servers (Temporal CLI dev server, FerretDB) once and caches them
# outside the clone, keyed by version. Prints the path of each binary on its last lines.
# Usage: scripts/install-tools.sh [temporal|ferretdb|nginx|postgresql|all] (nginx, postgresql: the Debian packages, when
# we may install them; `all` is temporal, ferretdb and nginx)
set -euo pipefail

TEMPORAL_VERSION="v1.5.1"
FERRETDB_VERSION="v1.24.2"
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

# nginx serves deploy targets (README "Deployment arbitration"); optional, so a machine where we may not install
# packages only gets the command to run. The Debian package may also start a system nginx: the hub never uses it.
install_nginx() {
  if [ -x "${NGINX_BIN:-/usr/sbin/nginx}" ]; then log "nginx: $("${NGINX_BIN:-/usr/sbin/nginx}" -v 2>&1)"; return 0; fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo"; else log "nginx is not installed (deploys answer 503 without it); install it with: sudo apt-get install -y nginx"; return 0; fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then log "nginx is not installed; install your system's nginx package (deploys answer 503 without it)"; return 0; fi
  log "nginx: installing the Debian package (apt-get install -y nginx)..."
  $sudo apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q nginx >/dev/null || { log "nginx: install failed; run: sudo apt-get install -y nginx"; return 0; }
}

# PostgreSQL for FerretDB's postgresql backend (README "Storage backends"): optional, not part of `all`; once it is
# installed, `npm start` stores in it by default (FERRETDB_BACKEND=auto) for a new data dir, and bench:ledger
# measures it beside SQLite. Debian's package also creates and
# may start a system cluster: the hub never uses it (scripts/stack/postgres.ts runs its own under DATA_DIR).
install_postgresql() {
  if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then log "postgresql: $(ls -d /usr/lib/postgresql/*/bin/postgres | tail -1)"; return 0; fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo"; else log "postgresql is not installed; install it with: sudo apt-get install -y postgresql"; return 0; fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then log "postgresql is not installed; install your system's postgresql package"; return 0; fi
  log "postgresql: installing the Debian package (apt-get install -y postgresql)..."
  $sudo apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q postgresql >/dev/null || { log "postgresql: install failed; run: sudo apt-get install -y postgresql"; return 0; }
}

what="${1:-all}"
case "$what" in
  temporal) build temporal github.com/temporalio/cli/cmd/temporal "$TEMPORAL_VERSION" ;;
  ferretdb) build ferretdb github.com/FerretDB/FerretDB/cmd/ferretdb "$FERRETDB_VERSION" ;;
  all)
    build temporal github.com/temporalio/cli/cmd/temporal "$TEMPORAL_VERSION"
    build ferretdb github.com/FerretDB/FerretDB/cmd/ferretdb "$FERRETDB_VERSION"
    install_nginx
    ;;
  nginx) install_nginx ;;
  postgresql) install_postgresql ;;
  *) log "unknown tool '$what' (temporal, ferretdb, nginx, postgresql or all)"; exit 2 ;;
esac
