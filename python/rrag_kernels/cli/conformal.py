"""``rrag conformal calibrate | filter | sweep | plot``: the conformal claim filter on files.

Claims files
------------
A labelled file (``calibrate``, ``sweep``, ``plot``; default: the packaged sample of
``conformal-demo``) is either the released JSON document of Mohri & Hashimoto / Feng et al.
(``{"data": [{"prompt", "claims": [...]}]}``) or JSONL with one such response per line. A
claim is ``{"subclaim" (or "text"), "<score>-score" (or "score"), "annotation"}``; the
annotations in ``--supported`` (default ``Y S``) count as supported. ``filter`` reads the
same shape without annotations (plus an optional ``id``, and ``group`` for a
group-conditional calibration) and writes, per response, in order::

    {"line", "id"?, "prompt", "q_hat", "n_claims", "n_kept",
     "claims": [{"text", "score", "kept"}], "kept": [text, ...]}

or an error record ``{"line", "id"?, "error"}`` (``line``: the response's 1-based position
when the input is one JSON document).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from typing import Any

from ..pipelines import loads_one_value_per_key
from .common import (
    JsonlWriter,
    UsageError,
    add_resume_option,
    batch_status,
    check_distinct,
    error_record,
    existing_file,
    int_at_least,
    open_unit,
    output_file,
    parse_rows,
    read_lines,
    rows_to_run,
    stderr,
    unit_open_closed,
)

NOISE = {"stored": "stored", "hash": "hash", "none": None}
DEFAULT_ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.4)


# --------------------------------------------------------------------------- parser


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("conformal", help="conformal claim filter: calibrate, filter, sweep, plot",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cs = p.add_subparsers(dest="conformal_command", required=True, metavar="{calibrate,filter,sweep,plot}")

    labelled = argparse.ArgumentParser(add_help=False)
    labelled.add_argument("data", nargs="?", type=existing_file, default=None,
                          help="labelled claims (released JSON document or JSONL; default: the packaged sample)")
    labelled.add_argument("--score", default="relevance",
                          help="score name: each claim's '<score>-score' is read (default relevance)")
    labelled.add_argument("--noise", default="stored", choices=tuple(NOISE),
                          help="tie-break noise added to the scores (default stored: the claims' 'noise')")
    labelled.add_argument("--supported", nargs="+", default=["Y", "S"], metavar="ANNOTATION",
                          help="annotations counted as supported (default Y S)")
    labelled.add_argument("--a", type=unit_open_closed, default=1.0,
                          help="level a in (0, 1]: kept claims at least this share supported (default 1)")

    ca = cs.add_parser("calibrate", parents=[labelled], help="calibrate q_hat on a labelled file and save it as JSON")
    ca.add_argument("-o", "--output", type=output_file, required=True, help="calibration JSON to write")
    ca.add_argument("--alpha", type=open_unit, default=0.1, help="target miscoverage in (0, 1) (default 0.1)")
    ca.add_argument("--quiet", action="store_true", help="print nothing")
    ca.set_defaults(_parser=ca, func=_calibrate)

    fi = cs.add_parser("filter", help="filter the claims of each response with a saved calibration (JSONL out)")
    fi.add_argument("calibration", type=existing_file, help="JSON written by 'conformal calibrate'")
    fi.add_argument("input", type=existing_file, help="responses: JSONL (or a released JSON document)")
    fi.add_argument("output", type=output_file, help="JSONL to write, one line per response ('-': stdout)")
    fi.add_argument("--score", default=None, help="score name (default: the calibration's score_name)")
    fi.add_argument("--quiet", action="store_true", help="no summary on stderr")
    add_resume_option(fi)
    fi.set_defaults(_parser=fi, func=_filter)

    sweep = argparse.ArgumentParser(add_help=False)
    sweep.add_argument("--alphas", type=open_unit, nargs="+", default=list(DEFAULT_ALPHAS),
                       help=f"levels in (0, 1) (default {' '.join(map(str, DEFAULT_ALPHAS))})")
    sweep.add_argument("--splits", type=int_at_least(1), default=100, help="random calibration/test splits (100)")
    sweep.add_argument("--calib-fraction", type=open_unit, default=0.5, help="share calibrating each split (0.5)")
    sweep.add_argument("--seed", type=int_at_least(0), default=0, help="split seed (0)")

    sw = cs.add_parser("sweep", parents=[labelled, sweep], help="every alpha over random splits: a table (and CSV)")
    sw.add_argument("--csv", type=output_file, default=None, help="also write the table as CSV to this path")
    sw.set_defaults(_parser=sw, func=_sweep)

    pl = cs.add_parser("plot", parents=[labelled, sweep], help="the sweep's trade-off curve as PNG (matplotlib)")
    pl.add_argument("-o", "--output", type=output_file, required=True, help="image to write (.png, .svg, .pdf)")
    pl.add_argument("--title", default=None, help="plot title")
    pl.add_argument("--calibration", type=existing_file, default=None,
                    help="a JSON written by 'conformal calibrate' on this data (same --noise / --supported): "
                         "its score and a are used and its alpha and q_hat marked")
    pl.set_defaults(_parser=pl, func=_plot)
    return p


# --------------------------------------------------------------------------- reading claims


def _responses(path: str, what: str) -> list[tuple[int, dict | None, str | None]]:
    """``(number, response, error)``: a released JSON document (its ``data`` list, numbered
    from 1) or JSONL lines."""
    lines = read_lines(path, what)
    if lines and lines[0][1].lstrip().startswith("{"):
        try:
            doc = loads_one_value_per_key("".join(text for _, text in lines))
        except ValueError:  # not one JSON document (JSONL, or beyond the input limits): read as lines
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("data"), list):
            return [(n, r, None) if isinstance(r, dict) else (n, None, "response is not a JSON object")
                    for n, r in enumerate(doc["data"], 1)]
    return parse_rows(lines, what)


def _claim_error(claims: Any, key: str, labelled: bool) -> str | None:
    if not isinstance(claims, list):
        return "no 'claims' (a list of {'subclaim', '<score>-score', ...})"
    for c, cl in enumerate(claims):
        if not isinstance(cl, dict):
            return f"claim {c} is not a JSON object"
        s = cl.get(key, cl.get("score"))
        text = cl.get("text", cl.get("subclaim"))
        if not isinstance(text, str):  # the rule of POST /filter too (serve/schema.py)
            return f"claim {c} has no str 'text' (or 'subclaim')"
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            return f"claim {c} has no number {key!r} (or 'score')"
        if isinstance(s, int) and abs(s) > sys.float_info.max:  # exact int/float comparison, no overflow
            return f"claim {c}: its score {key!r} is beyond the float range"
        if math.isnan(s):
            return f"claim {c} has no number {key!r} (or 'score')"
        if labelled and "annotation" not in cl:
            return f"claim {c} has no 'annotation'"
    return None


def _prompt_error(resp: dict) -> str | None:
    prompt = resp.get("prompt", resp.get("question"))
    return None if prompt is None or isinstance(prompt, str) else \
        f"'prompt' must be a str, got {type(prompt).__name__}"  # as POST /filter


def _normalised(resp: dict, key: str) -> dict:
    """The response in the released schema: 'text' -> 'subclaim', 'score' -> '<score>-score'."""
    claims = []
    for cl in resp["claims"]:
        c = dict(cl)
        c.setdefault("subclaim", c.get("text", ""))
        if key not in c:
            c[key] = c["score"]
        claims.append(c)
    return {**resp, "prompt": resp.get("prompt", resp.get("question")) or "", "claims": claims}


def _labelled(args: argparse.Namespace) -> Any:
    """ClaimData of the labelled file (every response must be well formed: a usage error names
    the first bad one)."""
    from ..pipelines.conformal import from_responses, load_sample

    key = f"{args.score}-score"
    if args.data is None:
        rows = [(n, r, None) for n, r in enumerate(load_sample()["data"], 1)]
        what = "the packaged sample"
    else:
        rows = _responses(args.data, "data")
        what = args.data
    responses = []
    for n, resp, why in rows:
        why = why or _claim_error(resp.get("claims"), key, labelled=True)
        if why:
            raise UsageError(f"data: {what}: response {n}: {why}")
        responses.append(_normalised(resp, key))
    if not responses:
        raise UsageError(f"data: {what} holds no responses")
    try:
        data = from_responses(responses, score=args.score, noise=NOISE[args.noise], supported=args.supported)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"data: {what}: {exc}") from exc
    if not data.labels_ok.any():
        raise UsageError(f"data: {what}: no claim is annotated as supported ({' '.join(args.supported)}); "
                         "check --supported")
    return data


# --------------------------------------------------------------------------- commands


def _calibrate(args: argparse.Namespace) -> int:
    from ..pipelines.conformal import ClaimConformal

    data = _labelled(args)
    try:
        cc = ClaimConformal(alpha=args.alpha, a=args.a, score_name=args.score)
        cc.calibrate(data.scores, data.labels_ok, data.offsets)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        cc.save(args.output)
    except OSError as exc:
        raise UsageError(f"--output: {exc}") from exc
    if not args.quiet:
        print(f"calibrated on {data.n} responses ({len(data.scores)} claims, score {args.score!r}): alpha "
              f"{args.alpha:g}, a {args.a:g}, q_hat {cc.q_hat:.6g}; saved to {args.output}")
        if math.isinf(cc.q_hat):
            print(f"  note: too few responses for alpha {args.alpha:g} (k > n): q_hat = inf keeps no claim")
    return 0


def filter_records(cc: Any, responses: list[dict]) -> list[dict]:
    """The output records of ``rrag conformal filter`` (the module docstring's shape), one per
    response, in order: ``line``, ``id`` and
    :func:`rrag_kernels.pipelines.conformal.filter_responses`' record.

    Parameters
    ----------
    cc : ClaimConformal, calibrated
    responses : list of dict
        ``{"line": int, "id": any or None, "prompt": str, "group": any or None, "texts": list
        of str, "scores": list of float}`` (one score per claim text).
    """
    from ..pipelines import line_record
    from ..pipelines.conformal import filter_responses

    return [line_record(r["line"], r, rec) for r, rec in zip(responses, filter_responses(cc, responses))]


def _filter(args: argparse.Namespace) -> int:
    from ..pipelines.conformal import ClaimConformal

    check_distinct([args.calibration, args.input], args.output)
    try:
        cc = ClaimConformal.load(args.calibration)
    except (OSError, ValueError) as exc:
        raise UsageError(f"calibration: {exc}") from exc
    key = f"{args.score or cc.score_name}-score"
    grouped = isinstance(cc.q_hat, dict)
    rows = _responses(args.input, "input")
    with JsonlWriter(args.output, resume=args.resume) as out:
        rows = rows_to_run(rows, out, "conformal filter", args.quiet)
        records: list[dict | None] = [None] * len(rows)
        good: list[int] = []
        scored: list[dict] = []
        for k, (n, resp, why) in enumerate(rows):
            why = why or _claim_error(resp.get("claims"), key, labelled=False) or _prompt_error(resp)
            if why:
                records[k] = error_record(n, resp, why)
            else:
                resp = _normalised(resp, key)
                good.append(k)
                scored.append({"line": n, "id": resp.get("id"), "prompt": resp["prompt"], "group": resp.get("group"),
                               "texts": [c["subclaim"] for c in resp["claims"]],
                               "scores": [float(c[key]) for c in resp["claims"]]})
        for k, rec in zip(good, filter_records(cc, scored)):
            records[k] = rec
        for rec in records:
            out.write(rec)
    errors = sum("error" in r for r in records)
    kept = sum(r.get("n_kept", 0) for r in records)
    total = sum(r.get("n_claims", 0) for r in records)
    stderr(f"conformal filter: {len(records)} responses, {errors} errors, {kept}/{total} claims kept "
           f"(alpha {cc.alpha:g}, q_hat {cc.q_hat})", quiet=args.quiet)
    return batch_status("conformal filter", len(records), errors, out)


def _run_sweep(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..ops import conformal_sweep

    data = _labelled(args)
    try:
        res = conformal_sweep(data.scores, data.labels_ok, data.offsets, alphas=args.alphas, n_splits=args.splits,
                              calib_fraction=args.calib_fraction, seed=args.seed, a=args.a)
    except ValueError as exc:
        raise UsageError(f"{_sweep_flag(exc)}: {exc}") from exc
    return data, res


def _sweep_flag(exc: Exception, other: str = "data") -> str:
    """The option a sweep's ValueError is about (its message starts with the argument's name)."""
    name = str(exc).split(":", 1)[0]
    return {"calib_fraction": "--calib-fraction", "alphas": "--alphas", "n_splits": "--splits"}.get(name, other)


def _table(res: Any) -> list[dict[str, Any]]:
    import numpy as np

    summ = res.summary()
    rows = []
    for i, alpha in enumerate(np.asarray(res.alphas).tolist()):
        row: dict[str, Any] = {"alpha": alpha, "target": 1.0 - alpha}
        for name in res.METRICS:
            for stat in ("mean", "lo", "hi"):
                row[f"{name}_{stat}"] = float(summ[name][stat][i])
        row["q_hat_median"] = float(np.median(res.q_hat[:, i, 0])) if res.q_hat.shape[0] else float("nan")
        rows.append(row)
    return rows


def _sweep(args: argparse.Namespace) -> int:
    data, res = _run_sweep(args)
    rows = _table(res)
    print(f"conformal sweep: {data.n} responses, {len(data.scores)} claims, score {args.score!r}, a {args.a:g}; "
          f"{args.splits} splits, calibrate on {args.calib_fraction:.0%} (seed {args.seed}); "
          "mean [2.5 %, 97.5 %] over splits")
    print(f"{'alpha':>6} {'target':>6}  {'fully supported':<22} {'retained':<22} {'non-empty':<22} "
          f"{'q_hat (median)':>14}")
    for r in rows:
        cells = [f"{r[f'{m}_mean']:.3f} [{r[f'{m}_lo']:.3f}, {r[f'{m}_hi']:.3f}]"
                 for m in ("fully_supported", "retention", "non_empty")]
        print(f"{r['alpha']:>6.3g} {r['target']:>6.3g}  {cells[0]:<22} {cells[1]:<22} {cells[2]:<22} "
              f"{r['q_hat_median']:>14.6g}")
    if args.csv:
        try:
            fh = sys.stdout if args.csv == "-" else open(args.csv, "w", encoding="utf-8", newline="")
        except OSError as exc:
            raise UsageError(f"--csv: {exc}") from exc
        try:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        finally:
            if fh is not sys.stdout:
                fh.close()
    return 0


def _plot(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("plot needs matplotlib: pip install 'rrag_kernels[plot]'")
    from ..pipelines.conformal import ClaimConformal, plot_tradeoff

    if args.calibration is not None:
        try:
            cc = ClaimConformal.load(args.calibration)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--calibration: {exc}") from exc
        if isinstance(cc.q_hat, dict):
            raise UsageError("--calibration: a group-conditional calibration cannot be plotted from a claims file")
        args.score, args.a = cc.score_name, cc.a
        data = _labelled(args)
        try:
            res = cc.sweep(sorted({*args.alphas, cc.alpha}), n_splits=args.splits, calib_fraction=args.calib_fraction,
                           seed=args.seed, data=(data.scores, data.labels_ok, data.offsets))
        except ValueError as exc:
            raise UsageError(f"{_sweep_flag(exc, '--calibration')}: {exc}") from exc
        mark = {"mark_alpha": cc.alpha, "mark_label": f"q_hat {cc.q_hat:.4g}"}
    else:
        data, res = _run_sweep(args)
        mark = {}
    try:
        plot_tradeoff(res, args.output, title=args.title, **mark)
    except (OSError, ValueError) as exc:  # an unknown image suffix, an unwritable path
        raise UsageError(f"--output: {exc}") from exc
    print(f"wrote {args.output} (trade-off over {args.splits} splits of {data.n} responses)")
    return 0


# --------------------------------------------------------------------------- conformal-demo


def add_demo_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``conformal-demo`` (a top-level command, beside ``conformal``): calibrate on part of
    the packaged sample and filter the rest, at each ``--alpha``."""
    p = sub.add_parser("conformal-demo", help="calibrate a claim filter on the packaged sample and filter a response")
    p.add_argument("--alpha", type=open_unit, nargs="+", default=[0.1, 0.3],
                   help="target levels in (0, 1) (default 0.1 0.3)")
    p.add_argument("--scores", default="stored", choices=("stored", "live"),
                   help="claim scores stored in the sample (default, fast) or recomputed with MiniLM")
    p.add_argument("--seed", type=int, default=0, help="calibration/test split seed")
    p.add_argument("--calib-fraction", type=open_unit, default=0.7, help="share of responses used to calibrate")
    p.add_argument("--show", type=int_at_least(0), default=0, help="which test response to print claim by claim")
    p.set_defaults(func=run_demo)
    return p


def run_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from ..pipelines.conformal import ClaimConformal, from_responses, load_sample, score_sample

    sample = load_sample()
    if args.scores == "live":
        from ..models import MiniLMEmbedder

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
        raise UsageError(f"--calib-fraction: {args.calib_fraction} of {data.n} responses leaves "
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
