"""Typed slot values and the slot conflicts that do not wait for the judge (pipelines/mirage/slots.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ConstantNLI

from rrag_kernels.pipelines.mirage import MirageDefense, MirageParams
from rrag_kernels.pipelines.mirage.slots import slot_conflicts, slot_values


@pytest.mark.parametrize("text, expected", [
    ("It was completed on 31 March 1889 in Paris.", {"date": {(3, 31)}, "year": {1889}}),
    ("It reopened on August 13, 1961.", {"date": {(8, 13)}, "year": {1961}}),
    ("About 15% of couples sleep apart.", {"percent": {15.0}}),
    ("Fifteen percent of couples sleep apart.", {"percent": {15.0}}),
    ("Some 15 per cent of them.", {"percent": {15.0}}),
    ("Spending may reach $12.2 billion.", {"money": {("usd", 12.2e9)}}),
    ("It costs £100 billion a year.", {"money": {("gbp", 100e9)}}),
    ("They paid 5 million dollars.", {"money": {("usd", 5e6)}}),
    ("The survey asked 2,005 adults.", {"number": {2005.0}}),
    ("It stood 300 m tall.", {"number": {300.0}}),
    ("Three of them came.", {"number": {3.0}}),
    ("No value here.", {}),
])
def test_slot_values(text, expected):
    got = {k: v for k, v in slot_values(text).items() if k != "name"}
    assert got == expected


def test_names_are_runs_of_capitalised_words_not_at_the_start():
    assert slot_values("In 1453 Sultan Mehmed II took the city.")["name"] == {"sultan mehmed ii"}
    assert "name" not in slot_values("Paris is big.")
    assert "name" not in slot_values("It opened in March 1889.")  # a month is no name


def test_conflicts_need_a_type_in_common_with_no_shared_value():
    texts = ["It opened in 1889 in Paris.", "It opened in 1899 in Paris.", "It opened in 1889 and 1899.",
             "It has 300 rooms.", "In 1453 Sultan Mehmed II took the city of Constantinople.",
             "In 1453 Sultan Murad II took the city of Constantinople.",
             "The tower was designed by Gustave Eiffel for the fair."]
    i = np.array([0, 0, 0, 4, 4], dtype=np.int64)
    j = np.array([1, 2, 3, 5, 6], dtype=np.int64)
    assert slot_conflicts(texts, i, j).tolist() == [True, False, False, True, False]
    assert slot_conflicts(texts, i[:0], j[:0]).tolist() == []


def test_slot_conflicts_override_the_judge_when_on():
    passages = [{"text": "The bridge opened to traffic in 1932 after six years of work.", "url": "https://a.org/x"},
                {"text": "The bridge opened to traffic in 1932 after six years of building.",
                 "url": "https://b.org/y"},
                {"text": "The bridge opened to traffic in 1923 after six years of work.", "url": "https://c.org/z"}]
    on = MirageDefense(nli=ConstantNLI("entailment"), units="domain", slot_conflicts=True).defend("q", passages)
    kept = {c.text for c in on.claims if c.kept}
    assert passages[2]["text"] not in kept and passages[0]["text"] in kept
    off = MirageDefense(nli=ConstantNLI("entailment"), units="domain", slot_conflicts=False).defend("q", passages)
    assert passages[2]["text"] in {c.text for c in off.claims if c.kept}


@pytest.mark.parametrize("field, value", [("contr_min_far", 1.5), ("name_overlap", -0.1), ("tau_dup", 2.0),
                                          ("units", "words"), ("corroborate_by", "x"),
                                          ("coordinated_min_passages", 1), ("slot_conflicts", "false"),
                                          ("consensus_bigrams", 1)])
def test_new_params_are_validated(field, value):
    with pytest.raises((TypeError, ValueError), match=field):
        MirageParams(**{field: value}).validate()


def test_bool_fields_can_be_set_from_the_command_line():
    import argparse

    from rrag_kernels.cli.defend import _param_item

    assert _param_item("slot_conflicts=true") == ("slot_conflicts", True)
    assert _param_item("consensus_bigrams=OFF") == ("consensus_bigrams", False)
    assert _param_item("contr_min_far=0.7") == ("contr_min_far", 0.7)  # optional float
    with pytest.raises(argparse.ArgumentTypeError, match="slot_conflicts: expected bool"):
        _param_item("slot_conflicts=maybe")
