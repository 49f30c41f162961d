"""Command line: ``python -m rrag_kernels {info, demo, mirage-eval, conformal-demo, reliablerag-eval}``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import resources


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


def _print_result(result, labels: list[str] | None = None) -> None:
    s = result.stats
    t = s.get("timings", {})
    decision = "PASS" if result.gate_passed else f"BLOCK -> {result.fallback}"
    print(f"  gate: {decision} ({s.get('gate_reason')}); "
          f"{s.get('n_kept')}/{s.get('n_claims')} claims kept, {s.get('n_support')} support / "
          f"{s.get('n_contradiction')} contradiction edges kept, r_contr {s.get('r_contr', 0):.2f}, "
          f"{s.get('n_domains')} domains")
    print(f"  time: NLI {1e3 * t.get('nli_s', 0):.2f} ms, kernels {1e3 * t.get('kernels_s', 0):.3f} ms, "
          f"split {1e3 * t.get('split_s', 0):.3f} ms")
    for c in result.claims:
        tag = "kept" if c.kept else f"dropped ({c.reason})"
        label = f" [{labels[c.source]}]" if labels else ""
        print(f"    {tag:<22} s={c.score:5.2f} {c.domain:<28}{label} {c.text}")


def _demo(args: argparse.Namespace) -> int:
    from .pipelines.mirage import MirageDefense

    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    defense = MirageDefense(nli=_load_nli(args.nli), on_block=args.on_block, mode=args.mode)
    print(f"MIRAGE defense, NLI scorer: {type(defense.nli).__name__}, mode: {defense.params.mode}, "
          f"pairing: {defense.params.pairing}, on BLOCK: {defense.params.on_block}")
    for item in sample["questions"]:
        labels = [p.get("label", "?") for p in item["passages"]]
        passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
        print(f"\nQ: {item['question']}")
        result = defense.defend(item["question"], passages)
        _print_result(result, labels)
        if args.prompt:
            print("\n" + result.prompt)
    return 0


class _UsageError(Exception):
    """A mistake on the command line found after parsing (an unknown scorer, an unreadable
    data file): reported by argparse (exit 2), never as a traceback."""


def _load_nli(name: str | None):
    from .models import nli

    try:
        return nli.load(name)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        raise _UsageError(f"--nli: {exc}") from exc


def _mirage_eval(args: argparse.Namespace) -> int:
    from .pipelines.mirage import MirageParams, evaluate, format_report, load_dataset

    params = MirageParams(pairing=args.pairing, on_block=args.on_block, mode=args.mode)
    try:
        load_dataset(args.data)  # a malformed file is a usage error, found before any model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    scorer = _load_nli(args.nli)
    report = evaluate(args.data, nli=scorer, params=params, tune=not args.no_tune, folds=args.folds,
                      progress=not args.no_progress)
    print(f"NLI scorer: {args.nli or 'offline default'} ({type(scorer).__name__}); mode {params.mode}; "
          f"pairing {params.pairing}; on BLOCK: {params.on_block}")
    print("falsehood: false claims / claims delivered; true delivered: true claims delivered / all true claims; "
          "undef = every claim delivered; purity: passage-level, kept claims of every run\n")
    print(format_report(report["shipped"], f"gate as shipped (r_max {params.r_max}, d_min {params.d_min}, "
                                           f"min_support_share {params.min_support_share})"))
    if "tuned" in report:
        thr = report["tuned"]["thresholds"]
        print()
        print(format_report(report["tuned_summary"], f"gate tuned on this data (in-sample): r_max {thr.r_max}, "
                                                    f"d_min {thr.d_min}, min_support_share {thr.min_support_share}"))
        print()
        gates = "; ".join(f"r_max {g.r_max}, d_min {g.d_min}, share {g.min_support_share}" for _, g in report["fold_gates"])
        print(format_report(report["cross_validated"], f"cross-validated by question ({len(report['fold_gates'])} "
                                                      f"folds; each fold judged by the gate tuned on the others: {gates})"))
    return 0


def _existing_file(path: str) -> str:
    if not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"no such file: {path!r}")
    return path


def _folds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {value}")
    return value


def _conformal_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from .pipelines.conformal import ClaimConformal, from_responses, load_sample, score_sample

    sample = load_sample()
    if args.scores == "live":
        from .models import MiniLMEmbedder

        for resp, row in zip(sample["data"], score_sample(sample, MiniLMEmbedder())):
            for claim, value in zip(resp["claims"], row):
                claim["relevance-score"] = value
        source = "recomputed live (MiniLM + MultiHopRetriever + claim_relevance)"
    else:
        source = "stored in the sample (MiniLM + MultiHopRetriever + claim_relevance, precomputed)"
    data = from_responses(sample["data"], score="relevance", noise=None)
    perm = np.random.default_rng(args.seed).permutation(data.n)
    n_cal = int(round(args.calib_fraction * data.n))
    cal, test = data.subset(perm[:n_cal]), data.subset(perm[n_cal:])
    shown = min(max(args.show, 0), test.n - 1)
    print(f"Conformal factuality on the packaged sample: {data.n} responses, {len(data.scores)} claims; "
          f"scores R(c) {source}.")
    print(f"calibrate on {cal.n} responses, filter the other {test.n} (split seed {args.seed}); the guarantee "
          "holds on average over splits, not on every small test set")
    sl = test.claims_of(shown)
    for alpha in args.alpha:
        cc = ClaimConformal(alpha=alpha, score_name="relevance").calibrate(cal.scores, cal.labels_ok, cal.offsets)
        m = cc.evaluate(test.scores, test.labels_ok, test.offsets)
        keep = cc.filter(test.scores, test.offsets)
        print(f"\nalpha = {alpha:g} (target: all kept claims supported in >= {1 - alpha:.0%} of responses): "
              f"q_hat = {cc.q_hat:.4f}")
        print(f"  test set: fully supported {m['fully_supported']:.0%}, claims retained {m['retention']:.0%}, "
              f"non-empty {m['non_empty']:.0%}")
        print(f"  Q: {test.prompts[shown]}")
        for c in range(sl.start, sl.stop):
            tag = "kept   " if keep[c] else "removed"
            label = "supported" if test.labels_ok[c] else "unsupported"
            print(f"    {tag} R={test.scores[c]:.4f} [{label:<11}] {test.texts[c]}")
    return 0


def _reliablerag_eval(args: argparse.Namespace) -> int:
    from .pipelines.reliablerag import KEPT_STYLE, ChainParams, evaluate, format_report, load_multihop

    try:
        rows = load_multihop(args.data)  # a malformed file is a usage error, found before the model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    try:
        params = ChainParams(max_context=args.max_context).validate()
    except ValueError as exc:
        raise _UsageError(f"--max-context: {exc}") from exc
    try:
        from .models import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    except ImportError as exc:
        raise _UsageError(f"embedder: {exc}") from exc
    try:
        report = evaluate(rows, embedder, params=params, progress=not args.no_progress)
    except ValueError as exc:  # a malformed triple, gold_chain entry or a passage without 'label'
        raise _UsageError(f"data: {exc}") from exc
    print(f"ReliableRAG chains on {len(rows)} questions: oracle credibility (injected 1, others 10), supplied "
          f"triples, 'reliability' selector, MiniLM embeddings; K {params.k}, beams {params.beams}, "
          f"F {params.max_chains}, L {params.max_hops}, TBS at most {params.max_context} triples")
    print(f"injected = injected passages kept (1: the {KEPT_STYLE}-style one); inj top-K: share of injected "
          "triples among the first hop's candidates; inj TBS: in the context; gold recall: gold_chain triples "
          "in the context\n")
    print(format_report(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rrag_kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print the build and machine configuration")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=_info)
    demo = sub.add_parser("demo", help="run the MIRAGE defense on the packaged sample (offline)")
    demo.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default)")
    demo.add_argument("--prompt", action="store_true", help="also print the generated prompts")
    demo.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                      help="fallback when the gate blocks")
    demo.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                      help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    demo.set_defaults(func=_demo)
    ev = sub.add_parser("mirage-eval", help="clean / mixed / polluted harness on a labelled JSONL file")
    ev.add_argument("data", type=_existing_file, help="JSONL in the format of shared/data/polluted_dev.jsonl")
    ev.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default; "
                                                "'lexical' is model-free and fast)")
    ev.add_argument("--pairing", default="lexical", choices=("lexical", "semantic", "hybrid"))
    ev.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                    help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    ev.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                    help="fallback when the gate blocks (passthrough delivers the passages unchanged)")
    ev.add_argument("--folds", type=_folds, default=4, help="folds of questions for the cross-validation")
    ev.add_argument("--no-tune", action="store_true", help="skip the gate grid search and the cross-validation")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.set_defaults(func=_mirage_eval)
    cd = sub.add_parser("conformal-demo", help="calibrate a claim filter on the packaged sample and filter a response")
    cd.add_argument("--alpha", type=float, nargs="+", default=[0.1, 0.3], help="target levels (default 0.1 0.3)")
    cd.add_argument("--scores", default="stored", choices=("stored", "live"),
                    help="claim scores stored in the sample (default, fast) or recomputed with MiniLM")
    cd.add_argument("--seed", type=int, default=0, help="calibration/test split seed")
    cd.add_argument("--calib-fraction", type=float, default=0.7, help="share of responses used to calibrate")
    cd.add_argument("--show", type=int, default=0, help="which test response to print claim by claim")
    cd.set_defaults(func=_conformal_demo)
    rr = sub.add_parser("reliablerag-eval", help="ReliableRAG chains: alpha x injected passages grid (offline)")
    rr.add_argument("data", nargs="?", type=_existing_file, default="../shared/data/multihop_dev.jsonl",
                    help="JSONL in the format of shared/data/multihop_dev.jsonl "
                         "(default: ../shared/data/multihop_dev.jsonl)")
    rr.add_argument("--max-context", type=int, default=10, help="the most triples in the TBS context")
    rr.add_argument("--no-progress", action="store_true", help="no progress bar")
    rr.set_defaults(func=_reliablerag_eval)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except _UsageError as exc:
        parser.error(f"{args.command}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
