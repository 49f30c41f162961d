"""The batch commands of the ``rrag`` command line (``python -m rrag_kernels``).

:mod:`rrag_kernels.__main__` builds the parser and is the entry point; each module here adds
one command family (``add_parser(sub)``) and runs it (``run(args)``): :mod:`.defend` (MIRAGE
on unlabelled JSONL), :mod:`.conformal` (``conformal calibrate | filter | sweep | plot``),
:mod:`.reliablerag` (ReliableRAG on JSONL), :mod:`.bench` (a short kernel throughput check).
:mod:`.common` holds what they share: argument types, JSONL in and out, progress bars and
:class:`~.common.UsageError`. Only this layer prints; it imports the public faces only.
"""
