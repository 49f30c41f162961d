"""Benchmarks of the NLI scorers: the packaged model's speed (pairs/s) and quality on the
held-out split, and LexicalNLI's alignment kernel.

Speed: ``nli_batch`` -- 32 (premise, hypothesis) pairs in one call, tokenisation included,
on ``--threads`` cores (default 2):
  * ``torch-fp32``  the trained checkpoint in transformers (``AutoTokenizer`` + forward,
                    ``torch.no_grad``); needs ``--full``
  * ``ort-fp32``    ``OnnxNLI`` on the fp32 export (``model_fp32.onnx``); needs ``--full``
  * ``ort-int8``    ``OnnxNLI`` on the shipped int8 ``model.onnx`` (what ``nli.load()`` gives)
``--full`` is the ``full/`` folder that ``python -m rrag_kernels.train_nli --out DIR``
writes (``DIR/full``: the torch checkpoint and the fp32 ONNX file, too big to ship); without
it only the shipped int8 model is timed. Speed is reported, never asserted.

Quality (with ``../shared/data/nli/train_5.jsonl``, the domain group held out from
training): accuracy, macro-F1, per-class F1 and, per phenomenon, accuracy and the
predicted-label counts, for every available model and for the model-free ``LexicalNLI`` on
the same 400 pairs. The speed pairs are the first 32 validation pairs when the data is
present, else pairs written here.

Alignment: ``lexical_opcodes`` -- LexicalNLI's word alignment of many (premise, hypothesis)
pairs in one call, on token ids (minimal edits of 8-40-token sentences from a Zipf
vocabulary, 10 % unrelated pairs), at 800 pairs (one MIRAGE query: 400 pairs, both
directions) and 20,000 pairs:
  * ``python-difflib``  per pair ``difflib.SequenceMatcher(None, a, b, autojunk=False)
                        .get_opcodes()`` (``trim_affixes=False``: exactly what the kernel
                        computes then)
  * ``python-loop``     per pair the pure-Python alignment LexicalNLI used before the kernel
                        (common prefix / suffix, then difflib's blocks: the reference,
                        ``trim_affixes=True``)
  * ``rrag-cpp``        ``lexical_opcodes(..., backend="cpp")``
  Outputs must equal the reference exactly.

Usage::

    python benchmarks/bench_nli.py                          # shipped int8 + LexicalNLI
    python benchmarks/bench_nli.py --full /tmp/nli/out/full  # + ort-fp32 and torch-fp32
    python benchmarks/bench_nli.py --quick --no-csv
    python benchmarks/bench_nli.py --quick --kernel lexical_opcodes
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import BASELINE, RRAG, Case, Provider  # noqa: E402

KERNELS = ("nli_batch", "nli_quality", "lexical_opcodes")
BATCH = 32
ALIGN_PAIRS = {"full": (800, 20_000), "quick": (800,)}
DATA_DIR = harness.REPO_ROOT / ".." / "shared" / "data" / "nli"

# Written for this benchmark (used when the shared data is absent).
_FALLBACK = [
    ("The harbour bridge opened to traffic in 1932 after eight years of construction.",
     "The harbour bridge opened to traffic in 1948."),
    ("The orchestra gave its first concert in a converted warehouse near the river.",
     "The orchestra's first concert took place in a former warehouse by the river."),
    ("Ada moved to Lisbon in 2004 and opened a small bookshop there.",
     "Ada's bookshop in Lisbon sells mostly poetry."),
    ("The new vaccine was tested on 3,000 volunteers across four countries.",
     "The vaccine was tested on volunteers in several countries."),
]


def _load_rows() -> list[dict[str, Any]]:
    path = DATA_DIR / "train_5.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class TorchNLI:
    """The trained torch checkpoint behind the same predict_proba as OnnxNLI."""

    labels = ("entailment", "neutral", "contradiction")

    def __init__(self, directory: Path, threads: int) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.set_num_threads(threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        self.model = AutoModelForSequenceClassification.from_pretrained(str(directory), local_files_only=True).eval()
        id2label = {int(k): v.lower() for k, v in self.model.config.id2label.items()}
        self.perm = [next(k for k, v in id2label.items() if v == name) for name in self.labels]

    def predict_proba(self, premises: list[str], hypotheses: list[str], batch_size: int = BATCH) -> np.ndarray:
        out = []
        with self.torch.no_grad():
            for s in range(0, len(premises), batch_size):
                enc = self.tok(premises[s:s + batch_size], hypotheses[s:s + batch_size], padding=True,
                               truncation="longest_first", max_length=512, return_tensors="pt")
                out.append(self.torch.softmax(self.model(**enc).logits, dim=1)[:, self.perm].numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, 3), np.float32)


def _scorers(args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """name -> (scorer, provider kind); missing ones are reported and left out."""
    from rrag_kernels.models import nli

    out: dict[str, tuple[Any, str]] = {}
    so = None
    try:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
    except ImportError:
        print("note: onnxruntime missing; no ONNX rows")
    full = args.full
    if full is not None and not full.is_dir():
        print(f"note: --full {full} is not a directory; torch-fp32 and ort-fp32 left out")
        full = None
    if full is None:
        print("note: no --full DIR (train_nli's DIR/full); torch-fp32 and ort-fp32 left out")
    if full is not None:
        try:
            out["torch-fp32"] = (TorchNLI(full, args.threads), BASELINE)
        except Exception as exc:
            print(f"note: torch-fp32 unavailable: {harness._short_error(exc)}")
        if so is not None and (full / "model_fp32.onnx").is_file():
            out["ort-fp32"] = (nli.OnnxNLI(full / "model_fp32.onnx", session_options=so, batch_size=BATCH,
                                           providers=["CPUExecutionProvider"]), BASELINE)
    model_dir = nli.default_model_dir()
    if model_dir is None:
        print("note: no packaged NLI model under rrag_kernels/models/nli/packaged/; ort-int8 left out")
    elif so is not None:
        out["ort-int8"] = (nli.OnnxNLI(model_dir, session_options=so, batch_size=BATCH,
                                       providers=["CPUExecutionProvider"]), RRAG)
    return out


def speed_cases(scorers: dict[str, tuple[Any, str]], rows: list[dict[str, Any]]) -> list[Case]:
    if not scorers:
        return []
    if rows:
        pairs = [(r["premise"], r["hypothesis"]) for r in rows[:BATCH]]
    else:
        pairs = [_FALLBACK[k % len(_FALLBACK)] for k in range(BATCH)]
    prem, hyp = [p for p, _ in pairs], [h for _, h in pairs]
    providers = [Provider(name, (lambda s=s: s.predict_proba(prem, hyp)), kind=kind)
                 for name, (s, kind) in sorted(scorers.items(), key=lambda kv: kv[1][1] != BASELINE)]

    def check(p: np.ndarray) -> None:
        if p.shape != (BATCH, 3) or not np.isfinite(p).all() or not np.allclose(p.sum(1), 1, atol=1e-4):
            raise AssertionError(f"probabilities malformed: shape {p.shape}")

    def compare(p: np.ndarray, anchor: np.ndarray) -> None:
        agree = float((p.argmax(1) == anchor.argmax(1)).mean())
        if agree < 0.9:
            raise AssertionError(f"verdicts agree with the anchor on only {agree:.0%} of pairs")

    # ~MiniLM-L6 encoder: 6 layers x (4 d^2 + 2 d * 4d) weights, d = 384, per token, plus attention.
    n_tok = 60 * BATCH
    flops = 2.0 * n_tok * 6 * (12 * 384 * 384) + 2.0 * 2 * 6 * BATCH * 60 * 60 * 384
    return [Case(kernel="nli_batch", shape=f"batch={BATCH} pairs (~60 tokens each)", bytes=22e6,
                 flops=flops, providers=providers, check=check, compare=compare,
                 notes=["tokenisation included; verdict agreement with the first baseline must be >= 90%"])]


def minimal_edit_pairs(rng: np.random.Generator, n_pairs: int, vocab: int = 5_000) -> tuple[list, list]:
    """Token-id sequences: premises of 8-40 tokens (Zipf ids), hypotheses with 1-3 word
    replacements, insertions or deletions; 10 % of the hypotheses unrelated."""
    p = 1.0 / (np.arange(vocab) + 2.7)
    p /= p.sum()
    premises, hypotheses = [], []
    for _ in range(n_pairs):
        a = rng.choice(vocab, size=int(rng.integers(8, 41)), p=p)
        if rng.random() < 0.1:
            b = rng.choice(vocab, size=int(rng.integers(8, 41)), p=p)
        else:
            b = a.tolist()
            for _ in range(int(rng.integers(1, 4))):
                k, op = int(rng.integers(0, len(b))), int(rng.integers(0, 3))
                if op == 0:
                    b[k] = int(rng.choice(vocab, p=p))
                elif op == 1:
                    b.insert(k, int(rng.choice(vocab, p=p)))
                elif len(b) > 1:
                    del b[k]
        premises.append([int(x) for x in a])
        hypotheses.append([int(x) for x in b])
    return premises, hypotheses


def _csr(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in seqs], out=offsets[1:])
    return np.array([t for x in seqs for t in x], dtype=np.int64), offsets


def opcodes_python(ref: Any, premises: list[list[int]], hypotheses: list[list[int]], trim: bool):
    """Per pair in Python (difflib, or the trimmed reference alignment), then the same CSR
    arrays as the kernel's."""
    code = {t: k for k, t in enumerate(ref.LEXICAL_TAGS)}
    rows, op_offsets = [], [0]
    for a, b in zip(premises, hypotheses):
        spans = (ref.pair_opcodes_ref(a, b) if trim
                 else difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())
        rows.extend((code[tag], i1, i2, j1, j2) for tag, i1, i2, j1, j2 in spans)
        op_offsets.append(len(rows))
    return np.array(op_offsets, dtype=np.int64), np.array(rows, dtype=np.int32).reshape(-1, 5)


def align_cases(rng: np.random.Generator, sizes: tuple[int, ...]) -> list[Case]:
    from rrag_kernels import reference as ref

    try:
        from rrag_kernels import ops

        ops.lexical_opcodes([1], [0, 1], [1], [0, 1], backend="cpp")
    except Exception as exc:
        print(f"note: the C++ lexical_opcodes kernel is unavailable ({harness._short_error(exc)}); baselines only")
        ops = None
    cases = []
    for n in sizes:
        premises, hypotheses = minimal_edit_pairs(rng, n)
        (ta, oa), (tb, ob) = _csr(premises), _csr(hypotheses)
        for trim in (True, False):
            want = ref.lexical_opcodes_ref(ta, oa, tb, ob, trim)

            def check(out, want=want):
                for x, y, name in zip(out, want, ("op_offsets", "ops")):
                    if not np.array_equal(harness.to_numpy(x), y):
                        raise AssertionError(f"{name} differs from the reference")

            def compare(out, anchor):
                check(out, anchor)

            name, note = (("python-loop", "per pair: common prefix / suffix, then difflib's blocks (the reference)")
                          if trim else ("python-difflib", "per pair: difflib.SequenceMatcher(autojunk=False)"))
            providers = [Provider(name, partial(opcodes_python, ref, premises, hypotheses, trim), BASELINE, note)]
            if ops is not None:
                providers.append(Provider("rrag-cpp", partial(ops.lexical_opcodes, ta, oa, tb, ob, trim_affixes=trim,
                                                              backend="cpp"), RRAG))
            nbytes = float(ta.nbytes + oa.nbytes + tb.nbytes + ob.nbytes + want[0].nbytes + want[1].nbytes)
            cases.append(Case("lexical_opcodes", f"pairs={n} tokens=8-40 trim={trim}", nbytes, 0.0, providers,
                              check, compare, notes=[f"{len(ta) + len(tb)} tokens, {want[1].shape[0]} opcodes"]))
    return cases


def _quality(name: str, probs: np.ndarray, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from rrag_kernels.train_nli import evaluate

    labels = ("entailment", "neutral", "contradiction")
    gold = [r["label"] for r in rows]
    pred = probs.argmax(1)
    ev = evaluate(pred, gold, labels)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # e, n, c predicted, correct
    for r, k in zip(rows, pred):
        cell = per[f"{r['label'][:4]}/{r['phenomenon']}"]
        cell[int(k)] += 1
        cell[3] += int(labels[int(k)] == r["label"])
    ev["per_phenomenon"] = dict(per)
    ev["name"] = name
    return ev


def quality_report(scorers: dict[str, tuple[Any, str]], rows: list[dict[str, Any]]) -> None:
    from rrag_kernels.models.nli import EnsembleNLI, LexicalNLI

    print()
    print("== nli_quality on ../shared/data/nli/train_5.jsonl (held out from training)")
    if not rows:
        print(f"   skipped: {DATA_DIR / 'train_5.jsonl'} is absent (see ../shared/data/README.md)")
        return
    prem, hyp = [r["premise"] for r in rows], [r["hypothesis"] for r in rows]
    all_s = {name: s for name, (s, _) in scorers.items()}
    all_s["lexical"] = LexicalNLI()
    if "ort-int8" in all_s:  # what nli.load("ensemble") builds: the shipped model + LexicalNLI
        all_s["ensemble"] = EnsembleNLI([all_s["ort-int8"], all_s["lexical"]])
    results = [_quality(name, s.predict_proba(prem, hyp), rows) for name, s in all_s.items()]
    print(f"   {'scorer':<12} {'accuracy':>8} {'macro-F1':>8} {'F1 ent':>7} {'F1 neu':>7} {'F1 con':>7}")
    for ev in results:
        f1 = ev["f1"]
        print(f"   {ev['name']:<12} {ev['accuracy']:>8.3f} {ev['macro_f1']:>8.3f} {f1['entailment']:>7.3f} "
              f"{f1['neutral']:>7.3f} {f1['contradiction']:>7.3f}")
    lex = next(ev for ev in results if ev["name"] == "lexical")
    for ev in results:
        if ev["name"] != "lexical":
            print(f"   {ev['name']} vs lexical: accuracy {ev['accuracy'] / lex['accuracy']:.2f}x, "
                  f"macro-F1 {ev['macro_f1'] / max(lex['macro_f1'], 1e-9):.2f}x")
    for ev in results:
        print(f"   confusion {ev['name']} (rows gold e/n/c, columns predicted e/n/c): {ev['confusion']}")
    names = [ev["name"] for ev in results]
    print()
    print("   per phenomenon: accuracy (predicted e/n/c counts)")
    print(f"   {'gold/phenomenon':<34} {'n':>3} " + " ".join(f"{n:>20}" for n in names))
    keys = sorted(results[0]["per_phenomenon"], key=lambda k: ({"cont": 0, "enta": 1, "neut": 2}[k[:4]], k))
    for key in keys:
        n = sum(results[0]["per_phenomenon"][key][:3])
        cells = []
        for ev in results:
            e, ne, c, ok = ev["per_phenomenon"][key]
            cells.append(f"{ok / n:>5.2f} ({e:>2}/{ne:>2}/{c:>2})")
        print(f"   {key:<34} {n:>3} " + " ".join(f"{c:>20}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(parser, KERNELS)
    parser.set_defaults(threads=2)
    parser.add_argument("--full", type=Path, default=None, metavar="DIR",
                        help="train_nli's OUT/full folder (torch checkpoint + model_fp32.onnx)")
    args = parser.parse_args(argv)

    rk = harness.import_rrag()
    harness.set_threads(args.threads, rk)
    wanted = set(args.kernel or KERNELS)
    rows = _load_rows()
    if not rows and wanted & {"nli_batch", "nli_quality"}:
        print(f"note: {DATA_DIR / 'train_5.jsonl'} absent; timing on pairs written here, no quality table")
    scorers = _scorers(args) if wanted & {"nli_batch", "nli_quality"} else {}
    rng = np.random.default_rng(0)
    factories = [("nli_batch", lambda: speed_cases(scorers, rows)),
                 ("lexical_opcodes", lambda: align_cases(rng, ALIGN_PAIRS["quick" if args.quick else "full"]))]
    results = harness.run_cases("nli", factories, args, rk) if wanted & {"nli_batch", "lexical_opcodes"} else []
    if "nli_batch" in wanted:
        print()
        print(f"== pairs/s at batch {BATCH} on {args.threads} threads (median)")
    for res in results:
        if res.case.kernel != "nli_batch":
            continue
        rate = {row["provider"]: BATCH / (float(row["median_ms"]) * 1e-3) for row in res.rows}
        for name, r in rate.items():
            others = ", ".join(f"{r / rate[o]:.2f}x {o}" for o in rate if o != name)
            print(f"   {name:<12} {r:>8.1f} pairs/s" + (f"  ({others})" if others else ""))
    if "nli_quality" in wanted:
        quality_report(scorers, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
