"""``rrag info``: the build and machine configuration (:func:`rrag_kernels.show_config`)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("info", help="print the build and machine configuration")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from .. import show_config

    cfg = show_config()
    if args.json:
        print(json.dumps(cfg, indent=2))
    else:
        width = max(len(k) for k in cfg)
        for key, value in cfg.items():
            print(f"{key:<{width}}  {value}")
    return 0
