"""Command line: ``python -m rrag_kernels info``."""

from __future__ import annotations

import argparse
import json
import sys


def _info(args: argparse.Namespace) -> int:
    from . import show_config

    cfg = show_config()
    if args.json:
        print(json.dumps(cfg, indent=2))
    else:
        width = max(len(k) for k in cfg)
        for key, value in cfg.items():
            print(f"{key:<{width}}  {value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rrag_kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print the build and machine configuration")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=_info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
