"""nli.load's names: the packaged names resolve offline, an unknown bare name fails at once with
the valid names listed, and only a path or an explicit hub id "org/model" reaches the
loaders; a hub id fails in seconds, not after a minute of retries, when the hub is offline or
unreachable. No test here opens a connection."""

from __future__ import annotations

import importlib.util
import socket
import time

import numpy as np
import pytest

from rrag_kernels.models import nli
from rrag_kernels.models.nli import cross_encoder_nli

HAS_ORT = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("tokenizers") is not None
needs_packaged_model = pytest.mark.skipif(
    not HAS_ORT or nli.default_model_dir() is None,
    reason="the packaged NLI model (and onnxruntime + tokenizers to run it) is needed",
)


class _Recorder:
    """Stands in for a loader class: records the call instead of loading anything."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self


def _refuse(*args, **kwargs):
    raise AssertionError(f"no test may open a connection or reach the hub loader: {args!r}")


@pytest.fixture
def hub_loader(monkeypatch):
    """CrossEncoderNLI replaced by a recorder, and every socket connection refused."""
    recorder = _Recorder()
    monkeypatch.setattr(nli, "CrossEncoderNLI", recorder)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    return recorder


def test_packaged_names():
    names = nli.packaged_names()
    assert names[-2:] == nli.BUILTIN_NAMES == ("lexical", "ensemble")
    assert ("minilm-nli" in names) == (nli.default_model_dir() is not None)


@needs_packaged_model
@pytest.mark.parametrize("name", ["minilm-nli", " MiniLM-NLI "])
def test_packaged_model_by_name(hub_loader, name):
    scorer = nli.load(name, batch_size=4)
    model = scorer.model if isinstance(scorer, nli.StackedNLI) else scorer  # with its stacker.json
    assert isinstance(model, nli.OnnxNLI) and model.path == nli.PACKAGED_DIR / "minilm-nli"
    assert model.batch_size == 4 and hub_loader.calls == []
    pair = (["The mill opened in 1901."], ["The mill opened in 1910."])
    np.testing.assert_array_equal(scorer.predict_proba(*pair), nli.load().predict_proba(*pair))


@needs_packaged_model
def test_any_packaged_directory_is_a_name(hub_loader, tmp_path, monkeypatch):
    (tmp_path / "packaged").mkdir()
    (tmp_path / "packaged" / "other-nli").symlink_to(nli.default_model_dir(), target_is_directory=True)
    monkeypatch.setattr(nli, "PACKAGED_DIR", tmp_path / "packaged")
    assert nli.packaged_names() == ("other-nli", "lexical", "ensemble")
    assert nli.load("other-nli").model.path == tmp_path / "packaged" / "other-nli"  # model + its stacker
    assert isinstance(nli.load("ensemble"), nli.EnsembleNLI) and hub_loader.calls == []


@pytest.mark.parametrize("typo, hint", [("minlm-nli", "minilm-nli"), ("lexicl", "lexical"), ("deberta", None)])
def test_unknown_bare_name_fails_at_once(hub_loader, typo, hint):
    start = time.perf_counter()
    with pytest.raises(ValueError, match="^name: unknown NLI model") as info:
        nli.load(typo)
    assert time.perf_counter() - start < 1.0  # it took ~56 s of hub retries before
    message = str(info.value)
    assert all(repr(n) in message for n in nli.packaged_names())
    assert "'org/model'" in message and "local path must exist" in message
    if hint is not None and hint in nli.packaged_names():
        assert f"did you mean {hint!r}?" in message
    assert hub_loader.calls == []


def test_paths_and_hub_ids(hub_loader, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for missing in ("./nope", "../nope", str(tmp_path / "nope"), "~/rrag-no-such-model", "a/b/c"):
        with pytest.raises(FileNotFoundError, match="^name: no such model file or directory"):
            nli.load(missing)
    with pytest.raises(FileNotFoundError, match="^name:"):
        nli.load(tmp_path / "minilm-nli")  # an os.PathLike is always a path, never a name
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="^name: .* is a file but not an ONNX model"):
        nli.load("weights.bin")
    assert hub_loader.calls == []

    # A local directory with a bare name is a path; a built-in name wins unless written as a path.
    (tmp_path / "my-model").mkdir()
    (tmp_path / "lexical").mkdir()
    assert isinstance(nli.load("lexical"), nli.LexicalNLI) and hub_loader.calls == []
    nli.load("my-model")
    nli.load("./lexical")
    assert [c[0][0].name for c in hub_loader.calls] == ["my-model", "lexical"]

    hub_loader.calls.clear()
    nli.load("cross-encoder/nli-deberta-v3-base", device="cpu")
    assert hub_loader.calls == [(("cross-encoder/nli-deberta-v3-base",), {"device": "cpu"})]


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="CrossEncoderNLI needs sentence-transformers")
def test_hub_id_fails_fast_when_the_hub_is_unreachable(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(cross_encoder_nli, "_hub_unreachable", lambda: "test: no network")
    monkeypatch.setattr(socket, "create_connection", _refuse)
    with pytest.raises(OSError, match=r"^name_or_path: cannot load .* from the local Hugging Face cache "
                                      r"\(the model hub is unreachable: test: no network\)") as info:
        nli.load("rrag-kernels-tests/no-such-model")
    assert "no test may open a connection" not in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="CrossEncoderNLI needs sentence-transformers")
def test_hub_id_offline_reads_the_cache_only(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(cross_encoder_nli, "_hub_unreachable", _refuse)  # offline: not even probed
    monkeypatch.setattr(socket, "create_connection", _refuse)
    with pytest.raises(OSError, match=r"from the local Hugging Face cache \(offline\)"):
        nli.load("rrag-kernels-tests/no-such-model")


class _Socket:
    def close(self):
        pass


def _connects(address, timeout):
    return _Socket()


def _fails(address, timeout):
    raise OSError(f"refused {address[0]}:{address[1]}")


def _hangs(address, timeout):
    time.sleep(1.0)  # longer than the probe waits
    return _Socket()


@pytest.mark.parametrize(
    "env, connect, want",
    [
        ({}, _connects, None),
        ({}, _fails, "cannot connect to huggingface.co:443 (OSError: refused huggingface.co:443)"),
        ({"HF_ENDPOINT": "http://hub.example:8080"}, _fails,
         "cannot connect to hub.example:8080 (OSError: refused hub.example:8080)"),
        ({}, _hangs, "no connection to huggingface.co:443 within 0.2 s"),
        ({"HTTPS_PROXY": "http://proxy:3128"}, _refuse, None),  # behind a proxy: not tried
    ],
    ids=["reachable", "refused", "HF_ENDPOINT", "no answer", "proxy"],
)
def test_hub_probe(monkeypatch, env, connect, want):
    for var in ("HF_ENDPOINT", *cross_encoder_nli._PROXY_VARS):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(socket, "create_connection", connect)
    assert cross_encoder_nli._hub_unreachable(timeout=0.2) == want
