"""Command line: ``python -m rrag_kernels {info, demo, mirage-eval, conformal-demo}``."""

from __future__ import annotations

import argparse
import json
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
    print(f"  gate: {'PASS' if result.gate_passed else 'BLOCK'} ({s.get('gate_reason')}); "
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
    defense = MirageDefense(nli=args.nli)
    print(f"MIRAGE defense, NLI scorer: {type(defense.nli).__name__}, pairing: {defense.params.pairing}")
    for item in sample["questions"]:
        labels = [p.get("label", "?") for p in item["passages"]]
        passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
        print(f"\nQ: {item['question']}")
        result = defense.defend(item["question"], passages)
        _print_result(result, labels)
        if args.prompt:
            print("\n" + result.prompt)
    return 0


def _mirage_eval(args: argparse.Namespace) -> int:
    from .pipelines.mirage import MirageParams, evaluate, format_report

    params = MirageParams(pairing=args.pairing)
    report = evaluate(args.data, nli=args.nli, params=params, tune=not args.no_tune, progress=not args.no_progress)
    print(format_report(report["shipped"], f"gate as shipped (r_max {params.r_max}, d_min {params.d_min}, "
                                           f"min_support_share {params.min_support_share}), pairing {params.pairing}"))
    if "tuned" in report:
        thr = report["tuned"]["thresholds"]
        print()
        print(format_report(report["tuned_summary"], f"gate tuned on this data (in-sample): r_max {thr.r_max}, "
                                                    f"d_min {thr.d_min}, min_support_share {thr.min_support_share}"))
        cv = report["cross_validated"]
        print("cross-validated pass rates (4 folds of questions): "
              + ", ".join(f"{k} {v:.1%}" for k, v in cv.items()))
    return 0


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rrag_kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print the build and machine configuration")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=_info)
    demo = sub.add_parser("demo", help="run the MIRAGE defense on the packaged sample (offline)")
    demo.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default)")
    demo.add_argument("--prompt", action="store_true", help="also print the generated prompts")
    demo.set_defaults(func=_demo)
    ev = sub.add_parser("mirage-eval", help="clean / mixed / polluted harness on a labelled JSONL file")
    ev.add_argument("data", help="JSONL in the format of shared/data/polluted_dev.jsonl")
    ev.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default)")
    ev.add_argument("--pairing", default="lexical", choices=("lexical", "semantic", "hybrid"))
    ev.add_argument("--no-tune", action="store_true", help="skip the gate grid search")
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
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
