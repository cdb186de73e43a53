#!/usr/bin/env bash
# The Python virtual environment CI uses (schemathesis, a2a-sdk), created once per Python version and requirements
# and reused by later runs: ~/.cache/zhongshu-hub/venv/<python version>-<requirements digest>/.
#   python-venv.sh           create it if missing, print its directory (progress goes to stderr)
#   python-venv.sh --path    print where it is (or would be), create nothing
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/requirements.txt"
python="${PYTHON:-python3}"
version="$("$python" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')"
digest="$(sha256sum "$requirements" | cut -c1-12)"
dir="${ZH_CACHE_DIR:-$HOME/.cache/zhongshu-hub}/venv/$version-$digest"
if [ "${1:-}" = "--path" ]; then echo "$dir"; exit 0; fi
if [ ! -x "$dir/bin/python" ] || [ ! -f "$dir/.complete" ]; then
  echo "[python-venv] creating $dir" >&2
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  "$python" -m venv "$dir" >&2
  "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  # Written last: a run stopped half-way leaves no venv that looks complete.
  touch "$dir/.complete"
fi
echo "$dir"
