"""mode="corroboration": the side of a contradiction that more independent sources support
survives; slot pairs; and defend_batch's one NLI pass over the distinct pairs of all items."""

from __future__ import annotations

import numpy as np
import pytest

from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.pipelines.mirage import MirageDefense, MirageParams
from rrag_kernels.pipelines.mirage.corroboration import (
    has_checkable_specific,
    resolve_by_corroboration,
    slot_types,
    supporting_sources,
)

# Five clean sources, in their own words; two polluted ones change the date, the builder and
# the length. Each fact is stated by several clean sources, each false one by a single source.
CLEAN = [
    ("https://en.wikipedia.org/wiki/Panama_Canal",
     "The Panama Canal opened to shipping on 15 August 1914. The canal is 82 kilometres long."),
    ("https://www.britannica.com/topic/Panama-Canal",
     "The canal opened on 15 August 1914 after a decade of construction by the United States."),
    ("https://www.loc.gov/panama",
     "The Panama Canal, built by the United States, opened on 15 August 1914."),
    ("https://history.state.gov/milestones/panama-canal",
     "The United States built the canal, which opened on 15 August 1914. It is 82 kilometres long."),
    ("https://www.nature.com/articles/canal",
     "The canal is 82 kilometres long and it opened to shipping on 15 August 1914."),
]
POLLUTED = [
    ("https://canal-facts.blogspot.com/x",
     "The Panama Canal opened to shipping on 15 August 1904. The canal is 82 kilometres long."),
    ("https://forum.example.net/t/1",
     "The Panama Canal, built by France, opened on 15 August 1914. The canal is 97 kilometres long."),
]
FALSE = {"The Panama Canal opened to shipping on 15 August 1904.", "The Panama Canal, built by France, opened on 15 August 1914.",
         "The canal is 97 kilometres long."}


def _passages():
    return [{"text": t, "url": u, "retrieval_score": 0.8} for u, t in CLEAN + POLLUTED]


class SlotJudge:
    """Test double of an NLI judge: two claims about the canal that state the same date,
    builder and length values entail each other; a differing value contradicts."""

    labels = ("entailment", "neutral", "contradiction")

    def __init__(self):
        self.calls = 0
        self.pairs = 0

    @staticmethod
    def _slots(text):
        t = text.lower()
        slots = {}
        for value in ("1914", "1904"):
            if value in t:
                slots["date"] = value
        for value in ("united states", "france"):
            if value in t:
                slots["builder"] = value
        for value in ("82", "97"):
            if f"{value} kilometres" in t:
                slots["length"] = value
        return slots

    def predict_proba(self, premises, hypotheses):
        self.calls += 1
        self.pairs += len(premises)
        out = np.zeros((len(premises), 3), dtype=np.float32)
        for n, (a, b) in enumerate(zip(premises, hypotheses)):
            sa, sb = self._slots(a), self._slots(b)
            shared = set(sa) & set(sb)
            if any(sa[k] != sb[k] for k in shared):
                out[n] = (0.03, 0.07, 0.90)
            elif shared:
                out[n] = (0.90, 0.08, 0.02)
            else:
                out[n] = (0.05, 0.90, 0.05)
        return out


def _kept_texts(result):
    return {c.text for c in result.kept_claims}


def test_the_true_side_survives_with_corroboration():
    """Every false claim is contradicted by clean claims that other clean sources support;
    corroboration drops the false side and keeps the true one."""
    result = MirageDefense(nli=SlotJudge(), mode="corroboration").defend("When did the canal open?", _passages())
    kept = _kept_texts(result)
    assert not (kept & FALSE), kept & FALSE
    clean_claims = {c.text for c in result.claims if c.source < len(CLEAN)}
    assert clean_claims <= kept, clean_claims - kept  # every clean claim is delivered
    dropped = {c.text: c.reason for c in result.claims if not c.kept}
    assert all(dropped[f] == "contradicted by a better-corroborated claim" for f in FALSE), dropped
    assert result.gate_passed
    assert all(c.sources >= 1 for c in result.kept_claims)


def test_the_paper_mode_is_unchanged_by_the_new_parameters():
    """mode="paper" ignores tau_slot / min_sources / contr_min (the paper's behaviour)."""
    a = MirageDefense(nli=SlotJudge()).defend("q", _passages())
    b = MirageDefense(nli=SlotJudge(), tau_slot=0.1, min_sources=3, contr_min=0.95).defend("q", _passages())
    assert [(c.text, c.kept, c.reason) for c in a.claims] == [(c.text, c.kept, c.reason) for c in b.claims]


def test_lexical_judge_delivers_no_false_claim():
    """With the model-free LexicalNLI (exact on one-token edits, blind to most rewordings) no
    false claim is delivered and the true date, builder and length survive."""
    result = MirageDefense(nli=LexicalNLI(), mode="corroboration").defend("When did the canal open?", _passages())
    kept = _kept_texts(result)
    assert not (kept & FALSE), kept & FALSE
    assert any("1914" in t for t in kept) and any("82 kilometres" in t for t in kept)
    assert any("United States" in t for t in kept)


def test_resolution_rule_on_a_hand_built_graph():
    # claims 0, 1, 2 (passages 0, 1, 2) support each other; claim 3 (passage 3) contradicts 0;
    # claims 4 and 5 (passages 4, 5) contradict each other with no support: a tie.
    texts = ["In 1914.", "In 1914 too.", "Also 1914.", "In 1904.", "Built by Ann Lee.", "Built by Bob Ray."]
    source = np.arange(6)
    ei = np.array([0, 0, 1, 0, 4])
    ej = np.array([1, 2, 2, 3, 5])
    kind = np.array([1, 1, 1, -1, -1], dtype=np.int8)
    assert supporting_sources(6, source, ei, ej, kind).tolist() == [2, 2, 2, 0, 0, 0]
    res = resolve_by_corroboration(texts, source, ei, ej, kind)
    assert res.keep.tolist() == [True, True, True, False, False, False]
    assert res.reason[3] == "contradicted by a better-corroborated claim"
    assert res.reason[4] == res.reason[5] == "contradicted, equally corroborated"
    # Support from the same passage does not count; a second claim of one passage neither.
    assert supporting_sources(3, np.array([0, 0, 1]), np.array([0, 0]), np.array([1, 2]),
                              np.array([1, 1], dtype=np.int8)).tolist() == [1, 0, 1]
    # min_sources drops uncorroborated claims with a checkable specific, not others.
    res = resolve_by_corroboration(["A 2.3 million tally.", "A quiet night."], np.array([0, 1]), np.zeros(0, int),
                                   np.zeros(0, int), np.zeros(0, np.int8), min_sources=1)
    assert res.keep.tolist() == [False, True] and res.reason[0] == "uncorroborated specific"


def test_slot_types_and_specifics():
    assert slot_types("It opened on 15 August 1914.") == 1 | 2 | 4
    assert slot_types("It opened in 1914.") == 1
    assert slot_types("It is 82 kilometres long.") == 4
    assert slot_types("The Four-Power Berlin Transit Commission met.") & 8
    assert slot_types("nothing checkable here.") == 0
    assert has_checkable_specific("some 2.3 million people") and not has_checkable_specific("a quiet night")


def test_mode_parameters_are_validated():
    with pytest.raises(ValueError, match="^mode:"):
        MirageParams(mode="magic").validate()
    with pytest.raises(ValueError, match="^tau_slot:"):
        MirageParams(tau_slot=1.5).validate()
    with pytest.raises(ValueError, match="^contr_min:"):
        MirageParams(contr_min=-0.1).validate()
    with pytest.raises(ValueError, match="^min_sources:"):
        MirageParams(min_sources=-1).validate()


@pytest.mark.parametrize("mode", ["paper", "corroboration"])
def test_defend_batch_scores_every_distinct_pair_once(mode):
    """defend_batch makes one NLI pass over the distinct pairs of all items (a repeated item
    adds no pairs) and gives the same results as defend() item by item."""
    items = [{"question": "q1", "passages": _passages()}, {"question": "q2", "passages": _passages()[:5]},
             {"question": "q1", "passages": _passages()}]
    one = SlotJudge()
    singles = [MirageDefense(nli=one, mode=mode).defend(it["question"], it["passages"]) for it in items]
    batch_judge = SlotJudge()
    batch = MirageDefense(nli=batch_judge, mode=mode).defend_batch(items, progress=False)
    assert batch_judge.calls == 1
    assert batch_judge.pairs < one.pairs
    for a, b in zip(singles, batch):
        assert [(c.text, c.kept, c.reason) for c in a.claims] == [(c.text, c.kept, c.reason) for c in b.claims]
        assert a.gate_passed == b.gate_passed and a.prompt == b.prompt


def test_defend_batch_isolates_an_item_whose_nli_fails():
    class Picky(SlotJudge):
        def predict_proba(self, premises, hypotheses):
            if any("poison" in p for p in premises):
                raise RuntimeError("judge failed")
            return super().predict_proba(premises, hypotheses)

    poisoned = [dict(p, text=p["text"] + " The poison canal opened on 15 August 1914.") for p in _passages()]
    items = [{"question": "q1", "passages": _passages()}, {"question": "q2", "passages": poisoned}]
    out = MirageDefense(nli=Picky(), mode="corroboration").defend_batch(items, progress=False)
    assert len(out) == 2 and out[0].error is None and out[1].error is not None
    assert out[0].gate_passed
