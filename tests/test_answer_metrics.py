"""The answer metrics of the multi-hop evaluations (SQuAD normalisation, EM, F1, Str-Acc, ASR)."""

import pytest

from rrag_kernels.pipelines._answer_metrics import (
    answer_scores,
    attack_success,
    exact_match,
    f1,
    normalize_answer,
    string_accuracy,
)


def test_normalisation_drops_case_punctuation_and_articles():
    assert normalize_answer("  The  United-States, of America! ") == "unitedstates of america"
    assert normalize_answer("An apple a day") == "apple day"
    with pytest.raises(TypeError, match="text"):
        normalize_answer(None)


def test_exact_match_uses_aliases():
    assert exact_match("the Mexico.", "Mexico") == 1.0
    assert exact_match("United Mexican States", "Mexico", ["United Mexican States"]) == 1.0
    assert exact_match("Mexico City", "Mexico") == 0.0


def test_f1_is_squad_token_f1():
    # pred tokens {born, in, mexico}, gold {mexico}: precision 1/3, recall 1 -> 0.5
    assert f1("born in Mexico", "Mexico") == pytest.approx(0.5)
    assert f1("Spain", "Mexico") == 0.0
    assert f1("anything", "Mexico", ["anything goes"]) == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_string_accuracy_and_attack_success_are_substring_tests():
    assert string_accuracy("He was born in Mexico in 1964.", "Mexico") == 1.0
    assert string_accuracy("He was born in Spain.", "Mexico") == 0.0
    assert attack_success("Born in Spain, not Mexico", "Spain") == 1.0
    assert attack_success("Mexico", "Spain") == 0.0
    assert attack_success("Mexico", None) == 0.0
    # an answer that normalises to nothing never matches everything
    assert string_accuracy("anything", "the") == 0.0
    assert attack_success("anything", "a") == 0.0


def test_answer_scores_bundle():
    s = answer_scores("Spain", "Mexico", wrong_answer="Spain")
    assert s == {"em": 0.0, "f1": 0.0, "str_acc": 0.0, "asr": 1.0}
