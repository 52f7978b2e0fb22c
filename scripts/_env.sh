# shellcheck shell=bash
# Sourced by scripts/test, scripts/bench and scripts/run: make (once) and reuse a virtualenv with frameview and the
# given extras.
#   FRAMEVIEW_VENV  where the virtualenv lives (default: <repo>/.venv)
#   PYTHON          interpreter used to create it (default: python3; needs >= 3.10)
#   TORCH_CPU_INDEX where the CPU build of torch comes from (default: PyTorch's CPU-only wheel index)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FRAMEVIEW_VENV:-$ROOT/.venv}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"

# torch==VERSION, CPU build, from PyTorch's CPU-only index (the torch wheels PyPI serves on Linux are the CUDA builds,
# which pull several GB of NVIDIA libraries). Only the torch wheel comes from that index (--no-deps); its
# dependencies (filelock, sympy, ...) then come from the usual index: the installed VERSION+cpu satisfies
# torch==VERSION, so pip adds only what is missing. If the CPU index cannot be reached, torch is left out: the tests
# that need it are skipped, and nothing falls back to PyPI's CUDA build.
_frameview_torch_cpu() {
  local version="$1"
  if "$VENV/bin/python" -m pip install -q --no-deps "torch==$version" --index-url "$TORCH_CPU_INDEX" &&
     "$VENV/bin/python" -m pip install -q "torch==$version"; then
    return 0
  fi
  echo "frameview: could not install torch $version (CPU build) from $TORCH_CPU_INDEX; the tests that use torch" \
       "will be skipped. Set TORCH_CPU_INDEX to a reachable mirror of that index to install it." >&2
}

# frameview_env EXTRAS [PIP SPECS...]: frameview[EXTRAS] (editable) and the specs, installed again only when
# pyproject.toml, the extras or the specs change. FRAMEVIEW_TORCH_CPU=VERSION adds the CPU build of torch.
frameview_env() {
  local extras="$1"; shift
  if [ ! -x "$VENV/bin/python" ]; then
    echo "frameview: creating virtualenv $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
  fi
  # reinstall only when pyproject.toml or the requested extras change
  local key="$extras $* ${FRAMEVIEW_NODEPS:-} ${FRAMEVIEW_TORCH_CPU:+torch-cpu-$FRAMEVIEW_TORCH_CPU}"
  local stamp="$VENV/.frameview-$(echo "$key" | tr -c 'a-zA-Z0-9' '_' | cut -c1-120)"
  local want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "frameview: installing frameview[$extras] $* into $VENV" >&2
    # torch first, from the CPU index, so that nothing installed later asks PyPI for it
    if [ -n "${FRAMEVIEW_TORCH_CPU:-}" ]; then _frameview_torch_cpu "$FRAMEVIEW_TORCH_CPU"; fi
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
