"""rrag: the command line of rrag_kernels (also ``python -m rrag_kernels`` and ``rrag-kernels``).

Batch commands read JSONL and write JSONL (count in = count out, a failed item an error
record); mistakes on the command line are argparse errors (exit 2), never tracebacks.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from typing import Any

from .cli import bench as _bench_cmd
from .cli import conformal as _conformal_cmd
from .cli import defend as _defend_cmd
from .cli import reliablerag as _reliablerag_cmd
from .cli import serve as _serve_cmd
from .cli.common import UsageError as _UsageError
from .cli.common import existing_file as _existing_file
from .cli.common import unit_closed
from .cli.common import int_at_least, make_embedder, make_llm, open_unit


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
          f"{s.get('n_domains')} {s.get('diversity', 'domains')}")
    print(f"  time: NLI {1e3 * t.get('nli_s', 0):.2f} ms, kernels {1e3 * t.get('kernels_s', 0):.3f} ms, "
          f"split {1e3 * t.get('split_s', 0):.3f} ms, source units {1e3 * t.get('units_s', 0):.1f} ms")
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


def _load_nli(name: str | None):
    from .models import nli

    try:
        return nli.load(name)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        raise _UsageError(f"--nli: {exc}") from exc


def _require_labels(rows: list[dict]) -> None:
    """mirage-eval measures against labels: every question needs passages labelled clean /
    polluted (or the multi-hop file's gold / distractor / injected), else the tables would be
    NaN rows."""
    if not rows:
        raise _UsageError("data: no questions in the file")
    unlabelled = [n for n, row in enumerate(rows, 1) if not isinstance(row["passages"], list) or
                  not any(isinstance(p, dict) and p.get("label") in ("clean", "polluted") for p in row["passages"])]
    if unlabelled:
        which = "no question" if len(unlabelled) == len(rows) else f"{len(unlabelled)} of {len(rows)} questions " \
                                                                   f"(first: question {unlabelled[0]})"
        raise _UsageError(f"data: {which} has labelled passages ('label': 'clean' / 'polluted', with "
                          "'false_sentences'); mirage-eval measures against labels. To defend unlabelled "
                          "questions use: rrag defend IN.jsonl OUT.jsonl")


def _first_row(path: str) -> Any:
    """The first JSON object of a JSONL file, or None (the loaders report what is wrong)."""
    from .pipelines.mirage import iter_jsonl

    try:
        return next(iter(iter_jsonl(path)), (0, None))[1]
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _mirage_eval_answers(args: argparse.Namespace, params: Any) -> int:
    """The coordinated-poisoning harness (RealtimeQA format): context ASR / utility per regime and
    attacker-URL variant, beside the undefended pipeline, mode="paper" and TrustRAG's first stage."""
    from .pipelines.mirage import evaluate_answers, format_answer_report, load_answer_rows

    try:
        load_answer_rows(args.data)  # a malformed file is a usage error, found before any model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    scorer = None if args.judge_accuracy is not None else _load_nli(args.nli)
    report = evaluate_answers(args.data, nli=scorer, params=params, judge_accuracy=args.judge_accuracy,
                              tune_trustrag=not args.no_tune, progress=not args.no_progress)
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


def _mirage_eval(args: argparse.Namespace) -> int:
    from .pipelines.mirage import evaluate, format_report, is_answer_row, load_dataset

    params = _defend_cmd.params_from_args(args, pairing=args.pairing, on_block=args.on_block, mode=args.mode)
    if is_answer_row(_first_row(args.data)):
        return _mirage_eval_answers(args, params)
    if args.judge_accuracy is not None:
        raise _UsageError("--judge-accuracy: only for the RealtimeQA format (rows with 'regimes' and "
                          "'incorrect_answer')")
    try:
        rows = load_dataset(args.data)  # a malformed file is a usage error, found before any model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    _require_labels(rows)
    scorer = _load_nli(args.nli)
    report = evaluate(args.data, nli=scorer, params=params, tune=not args.no_tune, folds=args.folds,
                      progress=not args.no_progress)
    print(f"NLI scorer: {args.nli or 'offline default'} ({type(scorer).__name__}); mode {params.mode}; "
          f"pairing {params.pairing}; on BLOCK: {params.on_block}"
          + "".join(f"; {name} {value}" for name, value in args.param))
    print("falsehood: false claims / claims delivered; true delivered: true claims delivered / all true claims; "
          "undef = every claim delivered; purity: passage-level, kept claims of every run\n")
    print(format_report(report["shipped"], f"gate as shipped (r_max {params.r_max}, d_min {params.d_min}, "
                                           f"min_support_share {params.support_share_min})"))
    if "ceiling" in report:
        from .pipelines.mirage import format_ceiling

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


def _folds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {value}")
    return value


# --------------------------------------------------------------------------- d2f, d2f-eval


def _d2f_params(args: argparse.Namespace, **over):
    from .pipelines.d2f import D2FParams

    flags = {"k": "--k", "threshold": "--threshold", "order": "--order", "max_calls": "--max-calls",
             "max_total_tokens": "--max-total-tokens", "max_depth": "--max-depth", "max_branch": "--max-branch",
             "reason_tokens": "--reason-tokens", "answer_tokens": "--answer-tokens", "seed": "--seed"}
    values = {name: getattr(args, name) for name in flags if getattr(args, name, None) is not None}
    if getattr(args, "max_total_tokens", None) == 0:
        values["max_total_tokens"] = None  # 0 on the command line: no token budget
    try:
        return D2FParams(**{**values, **over}).validate()
    except (TypeError, ValueError) as exc:
        name = str(exc).split(":", 1)[0]
        raise _UsageError(f"{flags.get(name, name)}: {exc}") from exc


def _d2f_llm(args: argparse.Namespace):
    """The LLM of d2f / d2f-eval: ``--url`` (any OpenAI-compatible server) or the embedded SmolLM2."""
    if not args.url and args.model:
        raise _UsageError("--model: names a model of the --url server; give --url too")
    return make_llm(args)


def _d2f_corpus(rows: list, what: str) -> list[dict]:
    """Passages from parsed JSONL rows (:func:`cli.common.parse_rows`): each a passage
    (``text``) or a question with ``passages``."""
    passages = []
    for n, row, why in rows:
        if row is None:
            if what == "--corpus":
                raise _UsageError(f"--corpus: line {n}: {why}")
            continue  # an input line that is not an object is that item's error record
        items = row["passages"] if isinstance(row.get("passages"), list) else ([row] if "text" in row else [])
        for p in items:
            if not (isinstance(p, dict) and isinstance(p.get("text"), str)):
                raise _UsageError(f"{what}: line {n}: a passage without a str 'text'")
            passages.append({k: p[k] for k in ("pid", "title", "text", "url") if p.get(k) is not None})
    return passages


def _d2f(args: argparse.Namespace) -> int:
    """The batch command's records, as the other batch commands': ``line``, ``id`` when the
    input had one, then :meth:`D2FResult.to_record` (``question``, ``answer``, the search's
    figures, ``trace``) or :meth:`D2FError.to_record` (``error``, ``error_type``, ``question``)."""
    from .cli.common import JsonlWriter, error_record, parse_rows, read_lines
    from .pipelines import line_record
    from .pipelines.d2f import D2FReAG, corpus_retriever

    params = _d2f_params(args)
    rows = parse_rows(read_lines(args.input, "input"), "input")
    corpus_rows = parse_rows(read_lines(args.corpus, "--corpus"), "--corpus") if args.corpus else rows
    corpus = _d2f_corpus(corpus_rows, "--corpus" if args.corpus else "input")
    if not corpus:
        raise _UsageError("no passages: give --corpus FILE, or 'passages' lists in the input lines")
    records: list[dict | None] = []
    todo: list[tuple[int, int, dict]] = []
    for n, row, why in rows:
        if why:  # not a JSON object: the method never sees it
            records.append(error_record(n, row, why))
        else:
            todo.append((len(records), n, row))
            records.append(None)
    embedder = make_embedder(args.embedder)
    method = D2FReAG(_d2f_llm(args), corpus_retriever(corpus, embedder), params)
    results = method.run_batch([row for _, _, row in todo], progress=not args.quiet)
    for (k, n, row), res in zip(todo, results):  # the method contract: one result per item
        records[k] = line_record(n, row, res.to_record())
    with JsonlWriter(args.output or "-") as out:
        for rec in records:
            out.write(rec)
    if not args.quiet:
        failed = sum("error" in rec for rec in records)
        print(f"d2f: {len(records)} items, {failed} errors", file=sys.stderr)
    return 0


def _d2f_eval(args: argparse.Namespace) -> int:
    import time

    from .pipelines.d2f import (
        CONTROL_SETTINGS,
        corpus_retriever,
        evaluate_control,
        evaluate_llm,
        format_report,
        load_questions,
        pooled_corpus,
    )

    try:
        rows = load_questions(args.data)
        corpus = pooled_corpus(rows)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    scripted = args.llm == "scripted"
    if scripted and (args.url or args.model):
        raise _UsageError("--url/--model: a real LLM is used with --llm model only")
    params = _d2f_params(args)
    embedder_name = args.embedder if args.embedder != "auto" else ("hashing" if scripted else "minilm")
    embedder = make_embedder(embedder_name)
    t0 = time.perf_counter()
    retriever = corpus_retriever(corpus, embedder)
    embed_s = time.perf_counter() - t0
    print(f"D2F-ReAG on {len(rows)} questions, corpus of {len(corpus)} pooled passages embedded with "
          f"{type(embedder).__name__} in {embed_s:.2f} s; k {params.k}, threshold {params.threshold}, "
          f"max depth {params.max_depth}, max branch {params.max_branch}")
    report: dict
    if scripted:
        print("control flow with the scripted LLM (a test double: judge score = crc32(seed:question|reasoning) "
              f"mod 11, seed {args.seed or 0}; gold sub_questions as the root's decomposition, synthetic parts "
              "below it; picks 1 and 2); decomp: share of roots decomposed; d<n>: questions whose deepest "
              "processed level is n; budget: share of questions where the budget stopped the search\n")
        settings = CONTROL_SETTINGS if args.order is None and args.max_calls is None else (("as given", {}),)
        report = evaluate_control(rows, retriever, settings=settings, seed=args.seed or 0, base=params,
                                  progress=not args.quiet)
        print(format_report(report))
    else:
        limit = args.limit if args.limit is not None else (None if args.url else 5)
        if limit is not None and limit < 1:
            raise _UsageError(f"--limit: must be >= 1, got {limit}")
        llm = _d2f_llm(args)
        name = f"{args.model or 'server default'} at {args.url}" if args.url else "embedded SmolLM2-135M-Instruct"
        print(f"LLM: {name}; order {params.order}, budget {params.max_calls} calls / "
              f"{params.max_total_tokens or 'no'} tokens per question; {limit or len(rows)} questions")
        try:
            if not args.no_rates:
                from .models import measure_rates

                print(f"measured rates: {measure_rates(llm, rounds=1, prompt_words=120, max_tokens=16)}")
            report = evaluate_llm(rows, llm, retriever, params=params, limit=limit, baseline=not args.no_baseline,
                                  progress=not args.quiet)
            print("EM / F1 / Str-Acc (gold a substring of the prediction) / ASR (the injected wrong answer in the "
                  "prediction); time per question: retrieval (query embedding included) and LLM\n")
            print(format_report(report))
            usage = getattr(llm, "usage", None)
            if callable(usage):
                u = usage()
                rates = ", ".join(f"{k} {v:.1f} tok/s" for k, v in (("prefill", u.prefill_tok_s),
                                                                     ("decode", u.decode_tok_s)) if v is not None)
                print(f"LLM usage over the run: {u.calls} calls, {u.prompt_tokens} prompt + {u.completion_tokens} "
                      f"completion tokens, {u.seconds:.1f} s" + (f"; {rates}" if rates else ""))
        finally:
            close = getattr(llm, "close", None)
            if callable(close):
                close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, default=str)
    return 0


def _d2f_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="an OpenAI-compatible server (e.g. http://localhost:8000/v1); "
                                              "default: the embedded SmolLM2-135M (offline)")
    p.add_argument("--model", default=None, help="the model name the --url server serves")
    p.add_argument("--timeout", type=float, default=300.0, help="read timeout per call in seconds (--url)")
    p.add_argument("--n-threads", type=int, default=1, help="threads of the embedded LLM (default 1)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context size of the embedded LLM")
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"),
                   help="passage embedder: MiniLM (offline model) or a model-free hashed bag of words")
    p.add_argument("--k", type=int, default=None, help="passages retrieved per question (default 3)")
    p.add_argument("--threshold", type=float, default=None, help="solved iff judge score / 10 >= this (default 0.7)")
    p.add_argument("--order", default=None, choices=("bfs", "dfs"), help="frontier order (default bfs)")
    p.add_argument("--max-depth", type=int, default=None, help="deepest level processed (default 3)")
    p.add_argument("--max-branch", type=int, default=None, help="sub-questions per decomposition (default 3)")
    p.add_argument("--max-calls", type=int, default=None, help="LLM calls per question (default 60)")
    p.add_argument("--max-total-tokens", type=int, default=None,
                   help="prompt + completion tokens per question before the search stops (default 60000; 0: none)")
    p.add_argument("--reason-tokens", type=int, default=None, help="max_tokens of a reasoning (default 256)")
    p.add_argument("--answer-tokens", type=int, default=None, help="max_tokens of the final answer (default 32)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (and the scripted judge's seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")


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
    if not 1 <= n_cal < data.n:
        raise _UsageError(f"--calib-fraction: {args.calib_fraction} of {data.n} responses leaves "
                          f"{n_cal} to calibrate and {data.n - n_cal} to test; both need at least one")
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
    from .pipelines.reliablerag import (
        KEPT_STYLE,
        ChainParams,
        credibility_auc,
        evaluate,
        evaluate_llm,
        format_auc,
        format_llm_report,
        format_report,
        load_multihop,
    )

    try:
        rows = load_multihop(args.data)  # a malformed file is a usage error, found before the model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    try:
        params = ChainParams(max_context=args.max_context).validate()
    except ValueError as exc:
        raise _UsageError(f"--max-context: {exc}") from exc
    use_llm = args.llm is not None or args.url is not None
    if args.model is not None and args.url is None:
        raise _UsageError("--model: needs --url")
    if args.limit is not None and args.limit < 1:
        raise _UsageError(f"--limit: must be >= 1, got {args.limit}")
    if not use_llm and args.credibility == "llm":
        raise _UsageError("--credibility llm: needs --llm embedded or --url")
    small = args.llm == "embedded"  # a 135M model on shared CPUs: a small search by default
    llm_params = {"k": args.k or (5 if small else 20), "beams": args.beams or (2 if small else 5),
                  "max_chains": args.max_chains or (3 if small else 20), "max_hops": args.max_hops or (2 if small else 4)}
    for name, value in llm_params.items():
        try:
            ChainParams(**{name: value}).validate()
        except ValueError as exc:
            raise _UsageError(f"--{name.replace('_', '-')}: {exc}") from exc
    if llm_params["k"] > 25:
        raise _UsageError(f"--k: the LLM selector letters at most 25 candidates, got {llm_params['k']}")
    judge = None
    if args.judge is not None:
        try:
            from .models import nli

            judge = nli.load(args.judge)
        except (ValueError, OSError, ImportError) as exc:
            raise _UsageError(f"--judge: {exc}") from exc
    try:
        from .models import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    except ImportError as exc:
        raise _UsageError(f"embedder: {exc}") from exc
    if not args.no_grid:
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
    llm, server = None, None
    try:
        if use_llm:
            from .models import EmbeddedLLM, LLMError, OpenAIChatLLM, measure_rates

            try:
                if small:
                    llm = EmbeddedLLM(n_ctx=4096, n_threads=args.n_threads)
                    server = llm
                else:
                    llm = OpenAIChatLLM(args.url, model=args.model, api_key_env=args.api_key_env)
            except (ImportError, FileNotFoundError, ValueError, TypeError, LLMError) as exc:
                raise _UsageError(f"--llm / --url: {exc}") from exc
        if not args.no_auc:
            sources = {"oracle": {"source": "oracle"}, "uniform": {"source": "uniform"},
                       "agreement": {"source": "agreement", "judge": judge}}
            auc_rows = rows
            if llm is not None:
                auc_rows = rows[: args.limit or (3 if small else len(rows))]
                sources["llm"] = {"source": "llm", "llm": llm}
            try:
                auc = credibility_auc(auc_rows, sources, progress=not args.no_progress)
            except ValueError as exc:
                raise _UsageError(f"data: {exc}") from exc
            print(f"\nCredibility vs the injected labels on {len(auc_rows)} questions (all passages, supplied "
                  "triples): ROC-AUC = P(a non-injected triple scores above an injected one), ties 1/2; per-q: mean "
                  "of the per-question AUCs; agreement judge: " + (args.judge or "package default") + "\n")
            print(format_auc(auc))
        if llm is not None:
            try:
                rates = measure_rates(llm, rounds=2, prompt_words=120, max_tokens=16)
                print(f"\nLLM rates: {rates}")
            except LLMError as exc:
                print(f"\nLLM rates: not measured ({exc})")
            limit = args.limit or (3 if small else None)
            p = ChainParams(max_context=args.max_context, **llm_params)
            rep = evaluate_llm(rows, llm, embedder, limit=limit, credibility_source=args.credibility,
                               credibility_options={"judge": judge} if args.credibility == "agreement" else None,
                               context=args.context, params=p, selector=args.selector,
                               progress=not args.no_progress)
            print(f"\nWith the LLM on {rep['n']} questions (all 7 passages, 2 injected): credibility "
                  f"{args.credibility}, context {args.context}, selector {args.selector}; K {p.k}, beams {p.beams}, "
                  f"F {p.max_chains}, L {p.max_hops}, alpha {p.alpha} (TRACE: alpha 1); vanilla / exclude<=3: "
                  "top-3 passages by MiniLM cosine; per-question means, seconds split kernels / embedder / LLM / "
                  "other\n")
            print(format_llm_report(rep))
    finally:
        if server is not None:
            server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rrag", description="rrag_kernels on the command line (also: python -m rrag_kernels). Batch commands "
        "read and write JSONL, one output line per input line (a failed item is an error record); '--quiet' "
        "silences progress bars. 'rrag COMMAND -h' describes a command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="print the build and machine configuration")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=_info)
    _bench_cmd.add_parser(sub)
    _defend_cmd.add_parser(sub)
    _conformal_cmd.add_parser(sub)
    _reliablerag_cmd.add_parser(sub)
    _serve_cmd.add_parser(sub)
    demo = sub.add_parser("demo", help="run the MIRAGE defense on the packaged sample (offline)")
    demo.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default)")
    demo.add_argument("--prompt", action="store_true", help="also print the generated prompts")
    demo.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                      help="fallback when the gate blocks")
    demo.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                      help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    demo.set_defaults(func=_demo)
    ev = sub.add_parser("mirage-eval", help="clean / mixed / polluted harness on a labelled JSONL file")
    ev.add_argument("data", type=_existing_file, help="JSONL in the format of shared/data/polluted_dev.jsonl "
                                                   "(or multihop_dev.jsonl, converted: see multihop_as_mirage; "
                                                   "or realtimeqa_dev.jsonl: the coordinated-poisoning harness)")
    ev.add_argument("--nli", default=None, help="NLI scorer name or path (default: offline default; "
                                                "'lexical' is model-free and fast)")
    ev.add_argument("--pairing", default="lexical", choices=("lexical", "semantic", "hybrid"))
    ev.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                    help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    ev.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                    help="fallback when the gate blocks (passthrough delivers the passages unchanged)")
    ev.add_argument("--folds", type=_folds, default=4, help="folds of questions for the cross-validation")
    ev.add_argument("--no-tune", action="store_true", help="skip the gate grid search and the cross-validation "
                                                           "(RealtimeQA format: the tuned TrustRAG row)")
    ev.add_argument("--judge-accuracy", type=unit_closed, default=None, metavar="P",
                    help="RealtimeQA format: replace the judge by a simulated one of accuracy P in [0, 1] "
                         "(gold labels from the answers the claims state)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    _defend_cmd.add_param_option(ev)
    ev.set_defaults(func=_mirage_eval)
    cd = sub.add_parser("conformal-demo", help="calibrate a claim filter on the packaged sample and filter a response")
    cd.add_argument("--alpha", type=open_unit, nargs="+", default=[0.1, 0.3],
                    help="target levels in (0, 1) (default 0.1 0.3)")
    cd.add_argument("--scores", default="stored", choices=("stored", "live"),
                    help="claim scores stored in the sample (default, fast) or recomputed with MiniLM")
    cd.add_argument("--seed", type=int, default=0, help="calibration/test split seed")
    cd.add_argument("--calib-fraction", type=open_unit, default=0.7, help="share of responses used to calibrate")
    cd.add_argument("--show", type=int_at_least(0), default=0, help="which test response to print claim by claim")
    cd.set_defaults(func=_conformal_demo)
    rr = sub.add_parser("reliablerag-eval", help="ReliableRAG chains: alpha x injected passages grid (offline)")
    rr.add_argument("data", nargs="?", type=_existing_file, default="../shared/data/multihop_dev.jsonl",
                    help="JSONL in the format of shared/data/multihop_dev.jsonl "
                         "(default: ../shared/data/multihop_dev.jsonl)")
    rr.add_argument("--max-context", type=int, default=10, help="the most triples in the TBS context")
    rr.add_argument("--no-progress", action="store_true", help="no progress bar")
    rr.add_argument("--judge", default=None, help="NLI judge of the 'agreement' credibility (default: the "
                                                  "package's default judge; 'lexical' is model-free and fast)")
    rr.add_argument("--no-grid", action="store_true", help="skip the offline alpha x injected grid")
    rr.add_argument("--no-auc", action="store_true", help="skip the credibility ROC-AUC table")
    rr_llm = rr.add_mutually_exclusive_group()
    rr_llm.add_argument("--llm", choices=("embedded",), default=None,
                        help="also answer with an LLM: 'embedded' = SmolLM2-135M on llama.cpp, offline")
    rr_llm.add_argument("--url", default=None, help="also answer with an OpenAI-compatible server at URL")
    rr.add_argument("--model", default=None, help="the server's model name (with --url)")
    rr.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    rr.add_argument("--limit", type=int, default=None, help="questions answered with the LLM (default: 3 "
                                                            "embedded, all with --url)")
    rr.add_argument("--credibility", default="oracle", choices=("oracle", "uniform", "agreement", "llm"),
                    help="credibility of ReliableRAG and of the exclusion baseline (default oracle)")
    rr.add_argument("--context", default="tbs", choices=("tbs", "sbs"), help="ReliableRAG's reader context")
    rr.add_argument("--selector", default="llm", choices=("llm", "reliability"), help="chain selector")
    rr.add_argument("--k", type=int, default=None, help="candidates per hop (default 20; 5 embedded)")
    rr.add_argument("--beams", type=int, default=None, help="letters per chain and hop (default 5; 2 embedded)")
    rr.add_argument("--max-chains", type=int, default=None, help="chains kept (default 20; 3 embedded)")
    rr.add_argument("--max-hops", type=int, default=None, help="hops (default 4; 2 embedded)")
    rr.add_argument("--n-threads", type=int, default=1, help="llama.cpp threads of the embedded LLM")
    rr.set_defaults(func=_reliablerag_eval)
    d2 = sub.add_parser("d2f", help="D2F-ReAG: JSONL of questions in, JSONL of answers and traces out")
    d2.add_argument("input", type=_existing_file, help="JSONL, one {'question', 'id'?, 'passages'?} per line")
    d2.add_argument("--corpus", type=_existing_file, default=None,
                    help="JSONL of passages ({'pid'?, 'title'?, 'text'}) or of questions with 'passages' "
                         "(default: the input's passages, pooled)")
    d2.add_argument("-o", "--output", default=None, help="output JSONL (default: stdout)")
    _d2f_common_args(d2)
    d2.set_defaults(func=_d2f)
    de = sub.add_parser("d2f-eval", help="D2F-ReAG: scripted control flow, or answer metrics with an LLM")
    de.add_argument("data", nargs="?", type=_existing_file, default="../shared/data/multihop_dev.jsonl",
                    help="JSONL in the format of shared/data/multihop_dev.jsonl "
                         "(default: ../shared/data/multihop_dev.jsonl)")
    de.add_argument("--llm", default="scripted", choices=("scripted", "model"),
                    help="scripted: control flow with the scripted LLM (no model); model: the embedded "
                         "SmolLM2, or the --url server")
    de.add_argument("--limit", type=int, default=None,
                    help="first N questions (--llm model; default 5 with the embedded model, all with --url)")
    de.add_argument("--no-baseline", action="store_true", help="skip vanilla RAG")
    de.add_argument("--no-rates", action="store_true", help="skip measuring the prefill/decode rates")
    de.add_argument("--json", default=None, help="also write the report as JSON to this path")
    _d2f_common_args(de)
    de.set_defaults(func=_d2f_eval)
    de.set_defaults(embedder="auto")  # hashing for the scripted LLM, MiniLM with a model
    for command in sub.choices.values():  # usage errors are told with the usage of the command that ran
        command.set_defaults(_parser=command)
    args = parser.parse_args(argv)
    import logging

    logger = logging.getLogger("rrag_kernels")
    level = logger.level
    if getattr(args, "quiet", False):  # the libraries' warnings (a failed item) are in the records already
        logger.setLevel(logging.ERROR)
    # SIGTERM (what schedulers and containers send) ends a run like Ctrl-C: outputs are closed
    # and said, never left half-written (only in the main thread, where Python runs handlers).
    import signal
    import threading

    on_term = None
    if threading.current_thread() is threading.main_thread():
        on_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return args.func(args)
    except _UsageError as exc:
        args._parser.error(str(exc))
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        logger.setLevel(level)  # main() may be called in process (tests, notebooks)
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
