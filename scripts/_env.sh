# shellcheck shell=bash
# Sourced by scripts/test and scripts/bench: make (once) and reuse a virtualenv with frameview and the given extras.
#   FRAMEVIEW_VENV  where the virtualenv lives (default: <repo>/.venv)
#   PYTHON          interpreter used to create it (default: python3; needs >= 3.10)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FRAMEVIEW_VENV:-$ROOT/.venv}"

frameview_env() {
  local extras="$1"; shift
  if [ ! -x "$VENV/bin/python" ]; then
    echo "frameview: creating virtualenv $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
  fi
  # reinstall only when pyproject.toml or the requested extras change
  local stamp="$VENV/.frameview-$(echo "$extras $* ${FRAMEVIEW_NODEPS:-}" | tr -c 'a-zA-Z0-9' '_' | cut -c1-120)"
  local want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "frameview: installing frameview[$extras] $* into $VENV" >&2
    if [ "$#" -gt 0 ]; then "$VENV/bin/python" -m pip install -q "$@"; fi
    "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]"
    # packages whose pins would break others (ovphysx pins packaging<24, which breaks pytest): no dependencies
    if [ -n "${FRAMEVIEW_NODEPS:-}" ]; then
      # shellcheck disable=SC2086
      "$VENV/bin/python" -m pip install -q --no-deps $FRAMEVIEW_NODEPS
    fi
    echo "$want" > "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
  cd "$ROOT"
}
