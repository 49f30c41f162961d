"""``rrag demo`` and ``rrag mirage-eval``: the MIRAGE defense on the packaged sample and on
labelled files.

``demo`` defends the packaged sample's questions and prints each gate decision and the kept
and dropped claims (offline). ``mirage-eval`` measures the defense against labels: the clean /
mixed / polluted harness of ``shared/data/polluted_dev.jsonl`` (and the converted multi-hop
file), or, on the RealtimeQA format (rows with ``regimes`` and ``incorrect_answer``), the
coordinated-poisoning harness. Unlabelled questions go to ``rrag defend`` (:mod:`.defend`),
whose ``--param`` option and :func:`~.defend.params_from_args` these commands share.
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from typing import Any

from .common import UsageError, existing_file, int_at_least, load_nli, unit_closed
from .defend import add_param_option, params_from_args


def add_parser(sub: Any) -> None:
    """Register ``demo`` and ``mirage-eval``."""
    demo = sub.add_parser("demo", help="run the MIRAGE defense on the packaged sample (offline)")
    demo.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default)")
    demo.add_argument("--prompt", action="store_true", help="also print the generated prompts")
    demo.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                      help="fallback when the gate blocks")
    demo.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                      help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    demo.set_defaults(func=run_demo)
    ev = sub.add_parser("mirage-eval", help="clean / mixed / polluted harness on a labelled JSONL file")
    ev.add_argument("data", type=existing_file, help="JSONL in the format of shared/data/polluted_dev.jsonl "
                                                  "(or multihop_dev.jsonl, converted: see multihop_as_mirage; "
                                                  "or realtimeqa_dev.jsonl: the coordinated-poisoning harness)")
    ev.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default; "
                                                "'lexical' is model-free and fast)")
    ev.add_argument("--pairing", default="lexical", choices=("lexical", "semantic", "hybrid"))
    ev.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                    help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    ev.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                    help="fallback when the gate blocks (passthrough delivers the passages unchanged)")
    ev.add_argument("--folds", type=int_at_least(2), default=4, help="folds of questions for the cross-validation")
    ev.add_argument("--no-tune", action="store_true", help="skip the gate grid search and the cross-validation "
                                                           "(RealtimeQA format: the tuned TrustRAG row)")
    ev.add_argument("--judge-accuracy", type=unit_closed, default=None, metavar="P",
                    help="RealtimeQA format: replace the judge by a simulated one of accuracy P in [0, 1] "
                         "(gold labels from the answers the claims state)")
    ev.add_argument("--limit", type=int_at_least(1), default=None, metavar="N",
                    help="only the file's first N questions (a quick check; the documented figures use all)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_param_option(ev)
    ev.set_defaults(func=run_eval)


# --------------------------------------------------------------------------- demo


def _print_result(result: Any, labels: list[str] | None = None) -> None:
    s = result.stats
    t = s.get("timings", {})
    decision = "PASS" if result.gate_passed else f"BLOCK -> {result.fallback}"
    print(f"  gate: {decision} ({s.get('gate_reason')}); "
          f"{s.get('n_kept')}/{s.get('n_claims')} claims kept, {s.get('n_support')} support / "
          f"{s.get('n_contradiction')} contradiction edges kept, r_contr {s.get('r_contr', 0):.2f}, "
          f"{s.get('n_domains')} {s.get('diversity', 'domains')}")
    print(f"  time: NLI {1e3 * t.get('nli_s', 0):.2f} ms, kernels {1e3 * t.get('kernels_s', 0):.3f} ms, "
          f"split {1e3 * t.get('split_s', 0):.3f} ms, source units {1e3 * t.get('units_s', 0):.1f} ms")
    for c in result.claims:
        tag = "kept" if c.kept else f"dropped ({c.reason})"
        label = f" [{labels[c.source]}]" if labels else ""
        print(f"    {tag:<22} s={c.score:5.2f} {c.domain:<28}{label} {c.text}")


def run_demo(args: argparse.Namespace) -> int:
    from ..pipelines.mirage import MirageDefense

    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    defense = MirageDefense(nli=load_nli(args.nli), on_block=args.on_block, mode=args.mode)
    print(f"MIRAGE defense, NLI scorer: {type(defense.nli).__name__}, mode: {defense.params.mode}, "
          f"pairing: {defense.params.pairing}, on BLOCK: {defense.params.on_block}")
    print("Each question mixes clean passages with polluted copies that change one fact. What to read: a "
          "[polluted] claim kept is a falsehood that reached the prompt, unless it is a sentence the edit left "
          "true; a [clean] claim dropped is a true claim the defense lost. It drops both sides of a "
          "contradiction it cannot settle, so where a false value is as corroborated as the true one, the "
          "true one goes too: the demo shows that cost as it is.")
    tally = {"clean": [0, 0], "polluted": [0, 0]}
    for item in sample["questions"]:
        labels = [p.get("label", "?") for p in item["passages"]]
        passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
        print(f"\nQ: {item['question']}")
        result = defense.defend(item["question"], passages)
        _print_result(result, labels)
        for c in result.claims:
            if labels[c.source] in tally:
                tally[labels[c.source]][0] += c.kept and result.gate_passed
                tally[labels[c.source]][1] += 1
        if args.prompt:
            print("\n" + result.prompt)
    (ck, cn), (pk, pn) = tally["clean"], tally["polluted"]
    print(f"\nReached the prompt: {ck} of {cn} claims of clean passages (the rest are true claims lost), "
          f"{pk} of {pn} claims of polluted passages (their edited sentences are false, the others true).")
    return 0


# --------------------------------------------------------------------------- mirage-eval


def _require_labels(rows: list[dict]) -> None:
    """mirage-eval measures against labels: every question needs passages labelled clean /
    polluted (or the multi-hop file's gold / distractor / injected), else the tables would be
    NaN rows."""
    if not rows:
        raise UsageError("data: no questions in the file")
    unlabelled = [n for n, row in enumerate(rows, 1) if not isinstance(row["passages"], list) or
                  not any(isinstance(p, dict) and p.get("label") in ("clean", "polluted") for p in row["passages"])]
    if unlabelled:
        which = "no question" if len(unlabelled) == len(rows) else f"{len(unlabelled)} of {len(rows)} questions " \
                                                                   f"(first: question {unlabelled[0]})"
        raise UsageError(f"data: {which} has labelled passages ('label': 'clean' / 'polluted', with "
                         "'false_sentences'); mirage-eval measures against labels. To defend unlabelled "
                         "questions use: rrag defend IN.jsonl OUT.jsonl")


def _first_row(path: str) -> Any:
    """The first JSON object of a JSONL file, or None (the loaders report what is wrong)."""
    from ..pipelines.mirage import iter_jsonl

    try:
        return next(iter(iter_jsonl(path)), (0, None))[1]
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _eval_answers(args: argparse.Namespace, params: Any) -> int:
    """The coordinated-poisoning harness (RealtimeQA format): context ASR / utility per regime and
    attacker-URL variant, beside the undefended pipeline, mode="paper" and TrustRAG's first stage."""
    from ..pipelines.mirage import evaluate_answers, format_answer_report, load_answer_rows

    try:
        load_answer_rows(args.data)  # a malformed file is a usage error, found before any model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    scorer = None if args.judge_accuracy is not None else load_nli(args.nli)
    report = evaluate_answers(args.data, nli=scorer, params=params, judge_accuracy=args.judge_accuracy,
                              tune_trustrag=not args.no_tune, progress=not args.no_progress,
                              limit=args.limit)
    judge = (f"simulated judge of accuracy {args.judge_accuracy}" if args.judge_accuracy is not None
             else f"{args.nli or 'offline default'} ({type(scorer).__name__})")
    print(f"NLI scorer: {judge}; defense mode {params.mode}; on BLOCK: {params.on_block}"
          + "".join(f"; {name} {value}" for name, value in args.param))
    print("ASR: questions whose delivered text holds the attacker's answer; utility: ... a right answer; "
          "util|ans: utility over the questions whose clean top-10 holds one (RobustRAG's normalisation, "
          "whole words); a blocked gate delivers nothing; deliv: claims (passages for undefended / "
          "trustrag) delivered per question")
    if report["trustrag_tuned"] is not None:
        print(f"trustrag: threshold 0.88; trustrag-tuned: threshold {report['trustrag_tuned']} chosen on this "
              "file (in-sample: the peer's best case)")
    print()
    print(format_answer_report(report["summary"], report["methods"]))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from ..pipelines.mirage import evaluate, format_report, is_answer_row, load_dataset

    params = params_from_args(args, pairing=args.pairing, on_block=args.on_block, mode=args.mode)
    if is_answer_row(_first_row(args.data)):
        return _eval_answers(args, params)
    if args.judge_accuracy is not None:
        raise UsageError("--judge-accuracy: only for the RealtimeQA format (rows with 'regimes' and "
                         "'incorrect_answer')")
    try:
        rows = load_dataset(args.data)  # a malformed file is a usage error, found before any model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    _require_labels(rows)
    scorer = load_nli(args.nli)
    report = evaluate(args.data, nli=scorer, params=params, tune=not args.no_tune, folds=args.folds,
                      progress=not args.no_progress, limit=args.limit)
    print(f"NLI scorer: {args.nli or 'offline default'} ({type(scorer).__name__}); mode {params.mode}; "
          f"pairing {params.pairing}; on BLOCK: {params.on_block}"
          + "".join(f"; {name} {value}" for name, value in args.param))
    print("falsehood: false claims / claims delivered; true delivered: true claims delivered / all true claims; "
          "undef = every claim delivered; purity: passage-level, kept claims of every run\n")
    print(format_report(report["shipped"], f"gate as shipped (r_max {params.r_max}, d_min {params.d_min}, "
                                           f"min_support_share {params.support_share_min})"))
    if "ceiling" in report:
        from ..pipelines.mirage import format_ceiling

        print()
        print(format_ceiling(report["ceiling"]))
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
