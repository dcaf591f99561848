"""The one wait every member's tests use: it returns the first answer that holds, and its failure
names what was awaited and the last answer seen."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.testing import eventually


def _asked(answers: list[int]) -> tuple[list[int], list[int]]:
    """A probe's record: the answers still to give, and those given so far."""
    return list(answers), []


@given(st.lists(st.integers(), min_size=1), st.integers())
def test_the_answer_returned_is_the_first_that_holds(answers: list[int], wanted: int) -> None:
    answers.append(wanted)  # one that holds always comes
    left, given_ = _asked(answers)

    def probe() -> int:
        given_.append(left.pop(0))
        return given_[-1]

    got = eventually(probe, "the wanted number", holds=lambda n: n == wanted, every=0)
    assert got == wanted
    assert given_ == answers[: answers.index(wanted) + 1]  # asked no more than needed


@pytest.mark.parametrize("falsy", [None, False, 0, "", []])
def test_without_a_condition_an_empty_or_false_answer_does_not_hold(falsy: object) -> None:
    answers = [falsy, "ready"]
    assert eventually(lambda: answers.pop(0), "ready", every=0) == "ready"


def test_a_wait_that_never_holds_names_what_and_the_last_answer() -> None:
    with pytest.raises(
        AssertionError,
        match=r"^gave up waiting for the sky to turn green after 0 s; last seen: 'blue'$",
    ):
        eventually(lambda: "blue", "the sky to turn green", holds=lambda s: s == "green", within=0)


def test_a_long_last_answer_is_cut_short_in_the_failure() -> None:
    with pytest.raises(AssertionError) as failure:
        eventually(lambda: "x" * 10_000, "nothing", holds=lambda _: False, within=0)
    message = str(failure.value)
    assert message.endswith("x...")
    assert len(message) < 2100


def test_an_answer_that_holds_is_kept_even_when_it_came_past_the_bound() -> None:
    # within=0: the bound has passed before the first answer, which holds and so is returned.
    assert eventually(lambda: 7, "seven", within=0) == 7
