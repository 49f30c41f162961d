#!/usr/bin/env bash
# Build rrag_kernels with sanitizers (outside the source tree) and run tests or a command on it.
#
#   tools/sanitize.sh asan  [pytest args]    ASan + UBSan (address,undefined,float-cast-overflow)
#   tools/sanitize.sh ubsan [pytest args]    UBSan alone (no preload; the fastest)
#   tools/sanitize.sh tsan  [pytest args]    TSan
#   tools/sanitize.sh MODE --run CMD [ARGS]  any command in the sanitized environment, e.g.
#                                            tools/sanitize.sh asan --run python fuzz/fuzz_ops.py --runs 2000
#   tools/sanitize.sh MODE --build-only
#
# The build goes to $RRAG_SANITIZE_DIR/MODE-build (default /tmp/rrag_sanitize), the package
# (python/rrag_kernels as it is now, with the sanitized _core) to $RRAG_SANITIZE_DIR/MODE, which
# is put first on PYTHONPATH; the source tree, python/rrag_kernels/_core*.so and the venv are
# never written. Rebuilds are incremental (a few seconds when csrc/ did not change).
# A sanitizer report makes the run fail: ASan and UBSan stop at the first one, TSan prints
# every race and exits 66. No leak checking (CPython, numpy and torch keep memory at exit).
# Environment: PY (default .venv/bin/python, else python3), RRAG_SANITIZE_DIR, SANITIZE_TESTS
# (the default test list, a space-separated list of paths), SANITIZE_SKIP_BUILD=1
# (use the last build as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

usage() { sed -n '2,10p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
MODE=$1; shift
case "$MODE" in
  asan)  SANITIZE=address,undefined,float-cast-overflow; RUNTIME=libasan.so ;;
  ubsan) SANITIZE=undefined,float-cast-overflow; RUNTIME= ;;
  tsan)  SANITIZE=thread; RUNTIME=libtsan.so ;;
  *) usage ;;
esac

if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
BASE=${RRAG_SANITIZE_DIR:-/tmp/rrag_sanitize}
BUILD=$BASE/$MODE-build
TARGET=$BASE/$MODE
mkdir -p "$BASE"

# The build backend: the venv's when it has one, else scikit-build-core and pybind11 installed
# once into $BASE/build-tools (pip's build isolation would make a fresh environment, and so a
# full rebuild, every time).
if "$PY" -c "import scikit_build_core, pybind11" 2>/dev/null; then
  TOOLS=
else
  TOOLS=$BASE/build-tools
  if ! PYTHONPATH=$TOOLS "$PY" -c "import scikit_build_core, pybind11" 2>/dev/null; then
    "$PY" -m pip install --quiet --target "$TOOLS" "scikit-build-core>=0.10" "pybind11>=2.13"
  fi
fi
start=$(date +%s)
if [ -n "${SANITIZE_SKIP_BUILD:-}" ] && [ -d "$TARGET/rrag_kernels" ]; then
  echo "sanitize.sh: SANITIZE_SKIP_BUILD set: using $TARGET as built" >&2
else
echo "sanitize.sh: building RRAG_SANITIZE=$SANITIZE into $TARGET (build dir $BUILD)" >&2
PYTHONPATH=$TOOLS "$PY" -m pip install --quiet --no-deps --no-build-isolation --upgrade --target "$TARGET" . \
  -C build-dir="$BUILD" -C cmake.define.RRAG_SANITIZE="$SANITIZE" -C cmake.define.RRAG_NATIVE=OFF
echo "sanitize.sh: build done in $(( $(date +%s) - start )) s" >&2
fi
[ "${1:-}" = "--build-only" ] && exit 0

export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# abort_on_error: a report is a SIGABRT, which the fuzzer (libFuzzer) catches and saves the input of.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1:${UBSAN_OPTIONS:-}"
if [ -n "$RUNTIME" ]; then
  LIB=$(gcc -print-file-name="$RUNTIME")
  [ -e "$LIB" ] || { echo "sanitize.sh: $RUNTIME not found (gcc -print-file-name)" >&2; exit 1; }
  # libstdc++ too: python is not linked with it, and the runtime's __cxa_throw interceptor
  # needs the real one present when it starts ("CHECK failed: ... real___cxa_throw").
  export LD_PRELOAD="$LIB $(gcc -print-file-name=libstdc++.so)${LD_PRELOAD:+ $LD_PRELOAD}"
fi
case "$MODE" in
  asan)
    # PYTHONMALLOC=malloc: Python objects get redzones too, so a binding that reads past an
    # object (a list taken for an array) is caught. allocator_may_return_null: a huge request
    # is a std::bad_alloc (MemoryError), as without ASan, not an ASan abort.
    export PYTHONMALLOC=malloc
    export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    ;;
  tsan)
    # Suppressions cover uninstrumented CPython / numpy / OpenBLAS / torch only, never csrc/.
    export TSAN_OPTIONS="suppressions=$ROOT/tools/tsan.supp:second_deadlock_stack=1:halt_on_error=0:report_signal_unsafe=0:${TSAN_OPTIONS:-}"
    # OpenBLAS' own pool (numpy's matmul in the reference and the tests) syncs in ways TSan
    # cannot see (uninstrumented spin waits): one BLAS thread instead of suppressing it.
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
    # The same for the tokenizers' rayon pool (Rust, uninstrumented), which MirageDefense's
    # embedder starts: its malloc/memcpy calls look racy to TSan because it cannot see rayon's
    # atomics. The tokenizers then encode on the calling thread.
    export TOKENIZERS_PARALLELISM=false
    ;;
esac
# Hypothesis' ci profile and the usual test settings; one thread pool size for every run.
export RRAG_NUM_THREADS=${RRAG_NUM_THREADS:-2}

"$PY" - <<'EOF' >&2
from rrag_kernels import _core
print(f"sanitize.sh: rrag_kernels._core from {_core.__file__}")
EOF

if [ "${1:-}" = "--run" ]; then
  shift
  [ $# -ge 1 ] || usage
  if [ "$1" = python ]; then shift; set -- "$PY" "$@"; fi
  exec "$@"
fi

if [ $# -eq 0 ]; then
  # Not under a sanitizer: the Triton interpreter (pure Python / NumPy, none of our native code);
  # the RLIMIT_AS child (ASan and TSan reserve terabytes of address space, and their operator
  # new aborts instead of throwing std::bad_alloc); the Ctrl-C test's 1 s latency bound (an
  # -O1 instrumented kernel checks for signals less often).
  SKIP="not triton and not test_allocation_failure_inside_workers_is_a_memory_error"
  SKIP="$SKIP and not test_ctrl_c_interrupts_a_long_kernel_within_a_second"
  # The kernels' own tests and the suites that drive them through every argument path, the
  # thread pool (thread counts, concurrent callers, worker errors) and the fuzz corpus (its
  # cases force every kernel onto the pool at 2-3 threads). The pipeline, model and
  # integration tests add no kernel path these do not cover.
  TESTS="tests/test_cosine_matrix.py tests/test_segmented_cosine.py tests/test_claim_relevance.py
    tests/test_topk_cosine.py tests/test_triple_reliability.py tests/test_beam_step.py tests/test_select_pairs.py
    tests/test_nli_graph.py tests/test_greedy_prune.py tests/test_gate_stats.py tests/test_lexical_align.py
    tests/test_r_scores.py tests/test_conformal_quantile.py tests/test_conformal_sweep.py
    tests/test_conformal_parity.py tests/test_validation.py tests/test_limits.py tests/test_properties.py
    tests/test_threads_and_simd.py tests/test_soak.py tests/test_fuzz_corpus.py"
  case "$MODE" in
    # + fork/spawn worker processes (TSan cannot follow a fork of a process with threads).
    asan|ubsan) TESTS="$TESTS tests/test_processes.py" ;;
  esac
  # The torch backend runs none of our native code either.
  export RRAG_TEST_BACKENDS=reference,cpp
  # shellcheck disable=SC2086
  set -- ${SANITIZE_TESTS:-$TESTS} -k "$SKIP"
fi
# Reports go to files: pytest captures the output of tests that pass, and a TSan report does
# not stop the test that made it. Every report fails the run.
REPORTS=$BASE/$MODE-reports
rm -rf "$REPORTS"; mkdir -p "$REPORTS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS}:log_path=$REPORTS/ubsan"
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$REPORTS/tsan"
start=$(date +%s)
set +e
"$PY" -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
n=$(find "$REPORTS" -type f | wc -l)
if [ "$n" -gt 0 ]; then
  find "$REPORTS" -type f -exec cat {} + >&2
  echo "sanitize.sh: $n sanitizer report file(s) in $REPORTS (above)" >&2
  [ "$rc" -ne 0 ] || rc=1
fi
echo "sanitize.sh: $MODE pytest exit $rc in $(( $(date +%s) - start )) s, $n sanitizer report file(s)" >&2
exit $rc
