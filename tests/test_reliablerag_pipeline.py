"""The ReliableRAG chain search (pipelines/reliablerag): control flow on a hand-made question
with a deterministic bag-of-words embedder, credibility and selector rules, the dev-data grid
(skipped when ../shared/data/multihop_dev.jsonl is absent) and the CLI's usage errors."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.__main__ import main
from rrag_kernels.pipelines.reliablerag import (
    Chain,
    ChainParams,
    ReliabilitySelector,
    build_chains,
    credibility,
    evaluate,
    format_report,
    get_selector,
    gold_texts,
    injection_setting,
    tbs_context,
    triples_from_passages,
)

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "multihop_dev.jsonl"


class BagOfWords:
    """Test double: hashed bag of lower-cased words, 256 dims, unit rows (zero row for no word)."""

    def __init__(self, dim: int = 256):
        self.dim, self.calls = dim, 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norm == 0, 1.0, norm)


def _passage(label, *triples):
    return {"label": label, "triples": [dict(zip(("head", "relation", "tail", "sentence"), t)) for t in triples]}


QUESTION = "In which country was the director of Pan's Labyrinth born?"
PASSAGES = [
    _passage("gold", ("Pan's Labyrinth", "directed by", "Guillermo del Toro", 0)),
    _passage("gold", ("Guillermo del Toro", "born in", "Mexico", 0), ("Guillermo del Toro", "born in", "Guadalajara", 1)),
    _passage("injected", ("Guillermo del Toro", "born in", "Spain", 0)),
    _passage("distractor", ("The Shape of Water", "directed by", "Guillermo del Toro", 0),
             ("Pan's Labyrinth", "directed by", "Guillermo del Toro", 2)),  # same text as passage 0's
]


@pytest.fixture
def question():
    triples = triples_from_passages(PASSAGES)
    return triples, credibility(QUESTION, PASSAGES, triples, source="oracle")


def _check_chains(result, triples, params):
    assert 1 <= len(result.chains) <= params.max_chains
    scores = [c.score for c in result.chains]
    assert scores == sorted(scores, reverse=True)
    for chain in result.chains:
        assert 1 <= len(chain.triples) <= params.max_hops
        assert len(set(chain.triples)) == len(chain.triples), "a used triple came back"
        assert all(0 <= t < len(triples) for t in chain.triples)


def test_triples_from_passages(question):
    triples, cred = question
    assert [t.passage for t in triples] == [0, 1, 1, 2, 3, 3]
    assert [t.sentence for t in triples] == [0, 0, 1, 0, 0, 2]
    assert triples[1].text == "Guillermo del Toro born in Mexico"
    assert cred.tolist() == [10, 10, 10, 1, 10, 10]
    with pytest.raises(ValueError, match="passage 0 triple 0: 'tail'"):
        triples_from_passages([{"triples": [{"head": "a", "relation": "b", "tail": " "}]}])


def test_credibility_sources(question):
    triples, _ = question
    assert credibility(QUESTION, PASSAGES, triples, source="uniform").tolist() == [10.0] * 6
    custom = credibility(QUESTION, PASSAGES, triples, source=lambda q, p, t: np.arange(len(t)))
    assert custom.tolist() == list(range(6))
    with pytest.raises(ValueError, match="source: expected one of"):
        credibility(QUESTION, PASSAGES, triples, source="nosuch")
    with pytest.raises(ValueError, match="in \\[0, 10\\]"):
        credibility(QUESTION, PASSAGES, triples, source=lambda q, p, t: np.full(len(t), 11.0))
    with pytest.raises(ValueError, match="passage 0 has no 'label'"):
        credibility(QUESTION, [{"triples": []}], [], source="oracle")


def test_reliability_selector_probabilities():
    sel = ReliabilitySelector(temperature=0.1, stop_rate=0.5)
    scores = np.array([[0.9, 0.8, 0.8, -np.inf], [0.5, -np.inf, -np.inf, -np.inf], [-np.inf] * 4], dtype=np.float32)
    chains, cands = [[], ["t"], ["t", "u"]], [["a", "b", "c"], ["a"], []]
    p = sel.choice_probs("q", chains, cands, scores)
    assert p.shape == (3, 5)
    assert p[0, 0] == 0.0 and p[1, 0] == 0.5 and p[2, 0] == 1.0   # stop: empty never, no candidate always
    assert np.isnan(p[0, 4]) and np.isnan(p[1, 2:]).all() and np.isnan(p[2, 1:]).all()
    np.testing.assert_allclose(np.nansum(p, axis=1), 1.0)
    assert p[0, 1] > p[0, 2] == p[0, 3]
    with pytest.raises(ValueError, match="temperature"):
        ReliabilitySelector(temperature=0.0)
    with pytest.raises(ValueError, match="selector: expected one of"):
        get_selector("nosuch")
    with pytest.raises(ValueError, match="needs llm="):
        get_selector("llm")


def test_chains_control_flow_and_determinism(question):
    triples, cred = question
    params = ChainParams(k=20, max_hops=4)
    emb = BagOfWords()
    first = build_chains(QUESTION, triples, cred, emb, params=params)
    _check_chains(first, triples, params)
    assert sorted(first.first_hop) == list(range(len(triples)))   # k >= T: every triple shown at hop 1
    assert first.first_hop[-1] == 3                                # the injected one (c = 1) ranks last
    again = build_chains(QUESTION, triples, cred, BagOfWords(), params=params)
    assert again.chains == first.chains and again.context == first.context
    # dedup: two triples share "Pan's Labyrinth directed by Guillermo del Toro"; the context has it once
    assert len(first.context) == len(set(first.context)) <= params.max_context
    assert all(triples[t].text == s for t, s in zip(first.context_triples, first.context))


def test_stop_behaviour(question):
    triples, cred = question
    always = build_chains(QUESTION, triples, cred, BagOfWords(), selector=ReliabilitySelector(stop_rate=1.0))
    assert all(len(c.triples) == 1 and c.finished for c in always.chains)
    assert always.hops == 2                                        # hop 2 only chose 'A'
    never = build_chains(QUESTION, triples, cred, BagOfWords(), params=ChainParams(max_hops=3),
                         selector=ReliabilitySelector(stop_rate=0.0))
    assert all(len(c.triples) == 3 and not c.finished for c in never.chains)   # closed at L
    # fewer triples than hops: a chain that has used them all stops (P(A) = 1)
    two = triples[:2]
    short = build_chains(QUESTION, two, cred[:2], BagOfWords(), params=ChainParams(max_hops=4),
                         selector=ReliabilitySelector(stop_rate=0.0))
    assert {c.triples for c in short.chains} == {(0, 1), (1, 0)} and all(c.finished for c in short.chains)


def test_a_custom_selector_is_used(question):
    triples, cred = question

    class LastCandidate:
        """Stop after one triple; at hop 1 take the lowest-ranked candidate."""

        def choice_probs(self, q, chains, candidates, scores):
            out = np.full((len(chains), scores.shape[1] + 1), np.nan)
            for b, (chain, cands) in enumerate(zip(chains, candidates)):
                out[b, 0] = 1.0 if chain else 0.0
                if not chain:
                    out[b, len(cands)] = 1.0
            return out

    res = build_chains(QUESTION, triples, cred, BagOfWords(), selector=LastCandidate())
    assert [c.triples for c in res.chains] == [(res.first_hop[-1],)]
    assert res.context == [triples[3].text]


def test_tbs_context_order_dedup_and_cap(question):
    triples, _ = question
    chains = [Chain((5, 4), 0.5, True), Chain((0, 1), 0.3, True), Chain((2,), 0.1, True)]
    assert tbs_context(triples, chains, 10) == [5, 4, 1, 2]        # triple 0 repeats triple 5's text
    assert tbs_context(triples, chains, 2) == [5, 4]


def test_params_validate():
    with pytest.raises(ValueError, match="alpha"):
        ChainParams(alpha=1.5).validate()
    with pytest.raises(ValueError, match="max_hops"):
        ChainParams(max_hops=0).validate()


@pytest.mark.skipif(not DEV.is_file(), reason=f"dev data absent: {DEV}")
def test_oracle_credibility_lowers_the_injected_share_on_dev_data():
    """Measured with this embedder (30 questions): injected share in the TBS context 0.000 at
    alpha 0.4 vs 0.191 / 0.278 at alpha 1 (1 / 2 injected passages); first-hop top-K 0.152 vs
    0.307 and gold recall 0.750 vs 0.450 with 2 injected. Asserted with a margin of 0.1."""
    report = evaluate(DEV, BagOfWords(), alphas=(0.4, 1.0), injected=(1, 2))
    for n in (1, 2):
        assert report[(n, 0.4)]["inj_tbs"] + 0.1 < report[(n, 1.0)]["inj_tbs"], format_report(report)
    assert report[(2, 0.4)]["inj_topk"] + 0.1 < report[(2, 1.0)]["inj_topk"], format_report(report)
    assert report[(2, 0.4)]["gold_recall"] > report[(2, 1.0)]["gold_recall"] + 0.1, format_report(report)


@pytest.mark.skipif(not DEV.is_file(), reason=f"dev data absent: {DEV}")
def test_dev_data_settings():
    import json

    row = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])
    labels = [p["label"] for p in row["passages"]]
    assert len(injection_setting(row["passages"], 2)) == 7
    kept = [row["passages"][i] for i in injection_setting(row["passages"], 1)]
    assert [p.get("style") for p in kept if p["label"] == "injected"] == ["news"]
    assert all(row["passages"][i]["label"] != "injected" for i in injection_setting(row["passages"], 0))
    assert labels.count("injected") == 2 and len(gold_texts(row)) == 2


@pytest.mark.parametrize("argv, message", [
    (["reliablerag-eval", "/no/such/file.jsonl"], "no such file"),
    (["reliablerag-eval", "{data}", "--max-context", "0"], "--max-context: max_context: must be >= 1, got 0"),
    (["reliablerag-eval", "{data}", "--max-context", "x"], "invalid int value"),
    (["reliablerag-eval", "{bad}"], "data: line 1 is not JSON"),
])
def test_cli_usage_errors(argv, message, tmp_path, capsys):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text('{"question": "q", "passages": []}\n')
    bad.write_text("not json\n")
    argv = [a.format(data=good, bad=bad) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
