"""rrag: the command line of rrag_kernels (also ``python -m rrag_kernels`` and ``rrag-kernels``).

Batch commands read JSONL and write JSONL (count in = count out, a failed item an error
record); mistakes on the command line are argparse errors (exit 2), never tracebacks. The
commands live in :mod:`rrag_kernels.cli` (one module per family); :func:`main` is
:func:`rrag_kernels.cli.main.main`, kept here as the console scripts' entry point.
"""

from __future__ import annotations

import sys

from .cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
