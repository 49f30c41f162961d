"""The commands of the ``rrag`` command line (``python -m rrag_kernels``).

:func:`.main.main` builds the parser and runs a command (:mod:`rrag_kernels.__main__` is the
entry point that calls it). Each family module adds its commands (``add_parser(sub)``) and
runs them (``run(args)``, or one ``run_*`` per command where a family has several):

* :mod:`.info` -- ``info`` (the build and machine configuration);
* :mod:`.bench` -- ``bench`` (a short kernel throughput check);
* :mod:`.defend` -- ``defend`` (MIRAGE on unlabelled JSONL; the defense options ``serve`` shares);
* :mod:`.mirage` -- ``demo`` (MIRAGE on the packaged sample), ``mirage-eval`` (on labelled files);
* :mod:`.conformal` -- ``conformal calibrate | filter | sweep | plot`` and ``conformal-demo``;
* :mod:`.reliablerag` -- ``reliablerag`` (ReliableRAG on JSONL) and ``reliablerag-eval``;
* :mod:`.d2f` -- ``d2f`` (D2F-ReAG on JSONL) and ``d2f-eval``;
* :mod:`.serve` -- ``serve`` (the HTTP server; FastAPI and uvicorn load only when it runs).

:mod:`.common` holds what they share: argument types, JSONL in and out, progress bars, the
LLM, embedder and NLI loaders and :class:`~.common.UsageError`. Only this layer prints; it
imports the public faces only (``rrag_kernels.pipelines.<method>``, ``rrag_kernels.models``,
``rrag_kernels.ops``, ``rrag_kernels.serve``).
"""
