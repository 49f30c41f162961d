"""The model-free NLI scorer (LexicalNLI), the NLI protocol contract, and the promise that
``rrag_kernels.models.nli`` works with NumPy alone.

The hand-written pairs below were written for these tests (minimal edits of made-up
sentences); the data-backed check reads ../shared/data/nli/train_5.jsonl (the validation
split: nothing was tuned on it) and skips when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.models import nli
from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.models.nli import lexical as lx
from rrag_kernels.models.nli.lexical.tokens import _tokenize

LABELS = ("entailment", "neutral", "contradiction")
NLI_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nli"

BRIDGE = "The bridge over the Ostra river opened in 1927 and carries two railway tracks."
LIBRARY = "The library holds about 40,000 books and was built in 1962 by the city council."
HARBOUR = "The harbour was rebuilt in 1953 after a severe storm."

# (premise, hypothesis, expected label, expected outcome)
CASES = {
    # contradictions: the differing span carries the changed fact
    "year_swap": (BRIDGE, BRIDGE.replace("1927", "1931"), "contradiction", "contradiction"),
    "number_word_swap": (BRIDGE, BRIDGE.replace("two", "four"), "contradiction", "contradiction"),
    "month_swap": ("The bridge opened in March 1927.", "The bridge opened in June 1927.", "contradiction", "contradiction"),
    "century_swap": ("The festival was founded in the eighteenth century by local weavers.",
                     "The festival was founded in the twentieth century by local weavers.", "contradiction", "contradiction"),
    "year_vs_century": (HARBOUR, "The harbour was rebuilt in the nineteenth century after a severe storm.",
                        "contradiction", "contradiction"),
    "negation_added": ("The museum is open on Sundays and attracts many school groups.",
                       "The museum is not open on Sundays and attracts many school groups.", "contradiction", "contradiction"),
    "negation_removed": ("The old mill has never been restored.", "The old mill has been restored.",
                         "contradiction", "contradiction"),
    "contracted_negation": ("The ferry runs in winter.", "The ferry doesn't run in winter.", "contradiction", "contradiction"),
    "name_swap": ("The orchestra was conducted by Helena Marsh during its first tour of Japan.",
                  "The orchestra was conducted by Pieter Voss during its first tour of Japan.",
                  "contradiction", "contradiction_weak"),
    "place_swap": ("The company moved its headquarters to Rotterdam in 2004.",
                   "The company moved its headquarters to Antwerp in 2004.", "contradiction", "contradiction_weak"),
    "before_after": ("The canal was dug before the railway reached the town.",
                     "The canal was dug after the railway reached the town.", "contradiction", "contradiction"),
    "quantifier": ("All of the village wells were dry by August.", "Some of the village wells were dry by August.",
                   "contradiction", "contradiction"),
    "superlative": ("The tower is the tallest building in the province.",
                    "The tower is the smallest building in the province.", "contradiction", "contradiction"),
    "role_swap": ("In the final, the Harbour Hawks defeated the Valley Rangers by two goals.",
                  "In the final, the Valley Rangers defeated the Harbour Hawks by two goals.",
                  "contradiction", "contradiction_weak"),
    # entailments: the hypothesis adds nothing of substance
    "conjunct_drop": (LIBRARY, "The library was built in 1962 by the city council.", "entailment", "entailment"),
    "prefix": (LIBRARY, "The library holds about 40,000 books.", "entailment", "entailment"),
    "identical": (HARBOUR, HARBOUR, "entailment", "entailment"),
    "decade": (HARBOUR, "The harbour was rebuilt in the 1950s after a severe storm.", "entailment", "entailment"),
    "century": (HARBOUR, "The harbour was rebuilt in the twentieth century after a storm.", "entailment", "entailment"),
    "lower_bound": ("The choir has 48 members.", "The choir has more than forty members.", "entailment", "entailment"),
    "digits_for_words": ("The ship carried twelve lifeboats.", "The ship carried 12 lifeboats.", "entailment", "entailment"),
    # neutrals: the hypothesis adds content the premise does not have
    "added_clause": (HARBOUR, "The harbour was rebuilt in 1953 after a severe storm, with funds from a shipping company.",
                     "neutral", "neutral"),
    "added_year": ("The harbour was rebuilt in 1953.", "The harbour was rebuilt in 1953 and reopened in 1955.",
                   "neutral", "neutral"),
    "added_name": ("The orchestra toured Japan in 1988.", "The orchestra toured Japan in 1988 under Helena Marsh.",
                   "neutral", "neutral"),
    "unrelated": ("The bridge opened in 1927.", "Penguins huddle together to survive the Antarctic winter.",
                  "neutral", "unknown"),
}


@pytest.fixture(scope="module")
def scorer():
    return LexicalNLI()


# --------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_written_pairs(scorer, case):
    premise, hypothesis, label, outcome = CASES[case]
    probs = scorer.predict_proba([premise], [hypothesis])
    got = scorer.outcomes([premise], [hypothesis])[0]
    assert got == outcome, scorer.features([premise], [hypothesis])[0]
    assert LABELS[int(probs[0].argmax())] == label
    np.testing.assert_allclose(probs[0], lx.DEFAULT_TABLE[outcome], atol=1e-7)


def test_all_cases_in_one_batch_match_one_by_one(scorer, rng):
    names = sorted(CASES)
    premises = [CASES[n][0] for n in names]
    hypotheses = [CASES[n][1] for n in names]
    batch = scorer.predict_proba(premises, hypotheses)
    single = np.vstack([scorer.predict_proba([p], [h]) for p, h in zip(premises, hypotheses)])
    np.testing.assert_array_equal(batch, single)
    perm = rng.permutation(len(names))
    shuffled = scorer.predict_proba([premises[k] for k in perm], [hypotheses[k] for k in perm])
    np.testing.assert_array_equal(shuffled, batch[perm])


def test_direction_matters(scorer):
    # Dropping a conjunct entails; adding it back is neutral.
    premise, hypothesis, _, _ = CASES["conjunct_drop"]
    fwd, bwd = scorer.outcomes([premise, hypothesis], [hypothesis, premise])
    assert (fwd, bwd) == ("entailment", "neutral")


def test_number_phrases_are_parsed():
    toks = _tokenize("In the eighteenth century about 150 ships, more than forty of them Dutch, "
                     "carried 7.2 million tonnes; by the 1840s fifty-six remained.")
    got = [(n.kind, n.lo, n.hi) for n in toks.numbers]
    assert got[0] == (1, 1701.0, 1800.0)
    assert got[1] == (0, pytest.approx(127.5), pytest.approx(172.5))
    assert got[2] == (0, 40.0, float("inf"))
    assert got[3] == (0, 7_200_000.0, 7_200_000.0)
    assert got[4] == (1, 1840.0, 1849.0)
    assert got[5] == (0, 56.0, 56.0)


# --------------------------------------------------------------------------- contract


def test_contract_shape_dtype_rows(scorer):
    p = scorer.predict_proba([c[0] for c in CASES.values()], [c[1] for c in CASES.values()])
    assert p.dtype == np.float32 and p.shape == (len(CASES), 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    assert scorer.labels == LABELS
    assert isinstance(scorer, nli.NLIScorer)


def test_empty_and_degenerate_inputs(scorer):
    out = scorer.predict_proba([], [])
    assert out.shape == (0, 3) and out.dtype == np.float32
    p = scorer.predict_proba(["", "...", "A"], ["", "!!", ""])
    assert p.shape == (3, 3) and np.isfinite(p).all()
    # tuples and numpy string arrays are sequences of str too
    q = scorer.predict_proba(("a b",), np.array(["a b"]))
    assert q.shape == (1, 3)


def test_bad_arguments(scorer):
    with pytest.raises(ValueError, match="hypotheses"):
        scorer.predict_proba(["a", "b"], ["a"])
    with pytest.raises(TypeError, match=r"hypotheses\[0\]"):
        scorer.predict_proba(["a"], [None])
    with pytest.raises(TypeError, match="premises"):
        scorer.predict_proba("a", ["a"])
    with pytest.raises(TypeError, match="premises"):
        scorer.predict_proba(3, ["a"])
    with pytest.raises(ValueError, match="min_coverage"):
        LexicalNLI(min_coverage=1.5)
    with pytest.raises(TypeError, match="max_new_content"):
        LexicalNLI(max_new_content=0.5)
    with pytest.raises(ValueError, match="table"):
        LexicalNLI(table={"neutral": (0.5, 0.5, 0.5)})
    with pytest.raises(ValueError, match="table"):
        LexicalNLI(table={"maybe": (0.2, 0.6, 0.2)})
    with pytest.raises(TypeError, match="embedder"):
        LexicalNLI(embedder=object())


def test_table_override(scorer):
    custom = LexicalNLI(table={"contradiction": (0.0, 0.0, 1.0)})
    premise, hypothesis, _, _ = CASES["year_swap"]
    np.testing.assert_array_equal(custom.predict_proba([premise], [hypothesis])[0], [0.0, 0.0, 1.0])
    assert custom.table["neutral"] == lx.DEFAULT_TABLE["neutral"]


class _FakeEmbedder:
    """Texts mentioning 'penguin' point one way, everything else another."""

    def __init__(self, shape_error=False):
        self.calls = 0
        self.shape_error = shape_error

    def encode(self, texts):
        self.calls += 1
        rows = [[1.0, 0.0] if "enguin" in t else [0.0, 2.0] for t in texts]
        return np.array(rows[:-1] if self.shape_error else rows)


def test_embedder_only_decides_unknown_pairs():
    emb = _FakeEmbedder()
    scorer = LexicalNLI(embedder=emb)
    premises = ["Penguins live in the south.", "The bridge opened in 1927.", CASES["year_swap"][0]]
    hypotheses = ["Colonies of penguins breed on ice shelves near the pole.",
                  "Penguins huddle together in the Antarctic winter.", CASES["year_swap"][1]]
    assert LexicalNLI().outcomes(premises, hypotheses) == ["unknown", "unknown", "contradiction"]
    p = scorer.predict_proba(premises, hypotheses)
    np.testing.assert_allclose(p[0], lx.DEFAULT_TABLE["entailment_weak"], atol=1e-7)  # cosine 1
    np.testing.assert_allclose(p[1], lx.DEFAULT_TABLE["neutral"], atol=1e-7)  # cosine 0
    np.testing.assert_allclose(p[2], lx.DEFAULT_TABLE["contradiction"], atol=1e-7)  # untouched
    assert emb.calls == 1
    with pytest.raises(ValueError, match="embedder"):
        LexicalNLI(embedder=_FakeEmbedder(shape_error=True)).predict_proba(premises, hypotheses)


# --------------------------------------------------------------------------- load() and imports


def test_load_lexical_and_default(tmp_path, monkeypatch):
    assert isinstance(nli.load("lexical"), LexicalNLI)
    emb = _FakeEmbedder()
    assert nli.load("lexical", embedder=emb).embedder is emb
    monkeypatch.setattr(nli, "PACKAGED_DIR", tmp_path / "no_models")
    assert isinstance(nli.load(), LexicalNLI)
    (tmp_path / "no_models" / "half").mkdir(parents=True)  # a model dir without model.onnx is ignored
    (tmp_path / "no_models" / "half" / "config.json").write_text("{}")
    assert nli.default_model_dir() is None
    with pytest.raises(ValueError, match="^name: empty"):
        nli.load("  ")


_NUMPY_ONLY = textwrap.dedent(
    """
    import importlib.abc, sys

    BLOCKED = ("torch", "onnxruntime", "transformers", "sentence_transformers", "tokenizers", "onnx")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Block())
    import rrag_kernels.models.nli as nli

    scorer = nli.load()
    assert type(scorer).__name__ in ("LexicalNLI", "OnnxNLI"), scorer
    scorer = nli.load("lexical")
    p = scorer.predict_proba(["The mill opened in 1901."], ["The mill opened in 1910."])
    assert p.shape == (1, 3) and p.argmax() == 2, p
    loaded = sorted(m for m in BLOCKED if m in sys.modules)
    assert not loaded, loaded
    print("ok")
    """
)


def test_import_and_lexical_need_only_numpy():
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", _NUMPY_ONLY], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


# --------------------------------------------------------------------------- validation split


def _read_split(name: str) -> list[dict]:
    path = NLI_DATA / name
    if not path.is_file():
        pytest.skip(f"the NLI data is not here ({path} is absent); it lives in ../shared/data/nli/")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_validation_split_train_5(scorer):
    """Regression floor on the held-out split (measured: see the module docstring of
    rrag_kernels.models.nli.lexical and the README). Nothing was tuned on train_5."""
    rows = _read_split("train_5.jsonl")
    probs = scorer.predict_proba([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    pred = np.array([LABELS[k] for k in probs.argmax(axis=1)])
    gold = np.array([r["label"] for r in rows])
    acc = float((pred == gold).mean())
    f1 = []
    for c in LABELS:
        tp = int(((pred == c) & (gold == c)).sum())
        fp = int(((pred == c) & (gold != c)).sum())
        fn = int(((pred != c) & (gold == c)).sum())
        f1.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    contr_precision = float((gold[pred == "contradiction"] == "contradiction").mean())
    assert acc >= ACC_FLOOR and np.mean(f1) >= F1_FLOOR, (acc, f1)
    assert contr_precision >= CONTR_PRECISION_FLOOR, contr_precision


# Measured on train_5 (see test_validation_split_train_5), minus a margin for harmless
# rule changes; a drop below these is a regression to look at.
ACC_FLOOR = 0.45
F1_FLOOR = 0.42
CONTR_PRECISION_FLOOR = 0.60
