"""`diagnose` runs where the bug shows: the first case `test` failed, or the first case with every switch on."""
import pytest

from arena.diagnose.choice import choose_case

ATTENTION = [{"s": 64, "causal": 0, "seed": 11}, {"s": 128, "causal": 1, "seed": 12},
             {"s": 200, "causal": 1, "seed": 13}]


def test_the_first_failed_case_wins_over_the_default():
    index, why = choose_case(ATTENTION, failed=[2, 1])
    assert index == 1 and "first case `test` fails" in why


def test_without_a_failure_a_causal_case_is_chosen_over_the_first_non_causal_one():
    index, why = choose_case(ATTENTION)
    assert index == 1 and "causal: 1" in why


def test_a_structured_data_case_is_not_the_default_choice():
    cases = [{"causal": 0}, {"causal": 1, "data": "large_scores"}, {"causal": 1}]
    assert choose_case(cases)[0] == 2


def test_without_switches_case_zero_is_chosen():
    assert choose_case([{"t": 16, "seed": 1}, {"t": 5, "seed": 2}]) == (0, "case 0: no case failed")


def test_no_cases_is_an_error():
    with pytest.raises(ValueError):
        choose_case([])
