#!/usr/bin/env bash
# Issue 25's GPU check in one device call (about 6 minutes on an H100 or H200):
#
#   run: bash benchmarks/device_check.sh            (timeout_s 420; results come back from $OUT)
#
# 1. builds and installs the package there (the device image holds torch, triton, cmake,
#    pybind11 and scikit-build-core; nothing is fetched);
# 2. compiles every Triton kernel for sm_90 (tools/triton_compile_check.py --strict-dot);
# 3. runs the CUDA tests (pytest -m gpu: CUDA in, CUDA out, auto's choice, nli_graph);
# 4. benchmarks/gpu_check.py: the edge checks for backend="triton" and backend="torch", then
#    rrag-triton, rrag-torch and rrag-auto timed against the torch baselines, rows to
#    $OUT/gpu.csv (append them to benchmarks/results/gpu.csv here); it prints the CUDA_AUTO
#    the rows call for (an op runs "triton" only where rrag-triton beats rrag-torch at every
#    size) and every size where rrag-auto falls below the baseline;
# 5. the first size of each kernel again with L2 flushed before each call (CSV mode gpu-flushed).
# Each step's log lands in $OUT; a failing step is reported and the next still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rrag_device_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
status=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.log"
  echo "== $name: exit $rc"
  [ "$rc" -eq 0 ] || status=1
  return 0
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
step install 150 "$PY" -m pip install --no-deps --no-build-isolation --no-cache-dir .
step compile 60 "$PY" tools/triton_compile_check.py --arch 90 --strict-dot
step tests 90 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_torch_io.py tests/test_nli_graph.py
step gpu_check 260 "$PY" benchmarks/gpu_check.py --budget-s 130 --csv "$OUT/gpu.csv"
# The kernels from memory (L2 flushed before each call): the first size of each kernel.
step gpu_flushed 100 "$PY" benchmarks/gpu_check.py --no-checks --quick --timing flushed --budget-s 60 \
    --csv "$OUT/gpu.csv"
exit $status
