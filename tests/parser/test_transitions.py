"""The transition table and the maps that carry it out: nothing in it can be left unhandled."""

from __future__ import annotations

import pytest

from parser import StreamParser
from parser.constructs import HANDLERS
from parser.dialects import DIALECTS
from parser.transitions import (
    CLOSERS,
    PREVIOUS,
    TRANSITIONS,
    Action,
    State,
    Transition,
    listened_names,
)


def test_every_action_in_the_table_resolves_to_a_handler() -> None:
    actions = {transition.action for transition in TRANSITIONS.values()}
    actions |= {closer.action for closer in CLOSERS.values()}
    # END_OPEN is the parser's own: it runs the open construct's closer (checked below).
    assert actions - {Action.END_OPEN} <= set(HANDLERS)
    assert set(HANDLERS) == set(Action) - {Action.END_OPEN}


@pytest.mark.parametrize("dialect", [pytest.param(name, id=name) for name in DIALECTS])
def test_every_state_has_a_step_and_an_emitter(dialect: str) -> None:
    parser = StreamParser(dialect)
    assert set(parser._steps) == set(State)
    assert set(parser._emitters) == set(State)
    for state in State:
        listened_names(parser.dialect, state)  # every state's listening set can be built


def test_every_construct_state_has_a_closer() -> None:
    assert set(CLOSERS) == set(State) - {State.TEXT}


def test_next_states_are_states_or_previous() -> None:
    for key, transition in TRANSITIONS.items():
        assert isinstance(transition, Transition), key
        assert transition.next is PREVIOUS or isinstance(transition.next, State), key


def test_an_implicit_end_goes_where_the_open_construct_closes_to() -> None:
    for (state, _, _), transition in TRANSITIONS.items():
        if transition.action is Action.END_OPEN:
            assert transition.next == CLOSERS[state].next, state


def test_returning_constructs_go_back_to_where_they_were_opened() -> None:
    """A thinking block opened inside a sandbox gives the sandbox back when it closes."""
    parser = StreamParser()
    states = []
    for chunk in (
        '<edward_sandbox project="p"><Thinking>x</Thinking>',
        "<edward_install>packages: zod</edward_install>",
        "</edward_sandbox><Thinking>y",
        "</Thinking>",
    ):
        parser.feed(chunk)
        states.append(parser._state)
    assert states == [State.SANDBOX, State.SANDBOX, State.THINKING, State.TEXT]
