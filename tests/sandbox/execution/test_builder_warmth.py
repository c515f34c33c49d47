"""When a sandbox's resident builder counts as warm: after a request to the same container's
builder, for less than WARM_FOR_SECONDS, until the sandbox's packages may change."""

from __future__ import annotations

import pytest

from sandbox.execution.builder_warmth import WARM_FOR_SECONDS, BuilderWarmth


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_builder_never_asked_is_cold() -> None:
    assert not BuilderWarmth(Clock()).is_warm("s1", "c1")


@pytest.mark.parametrize(
    ("container", "later", "warm"),
    [
        pytest.param("c1", 0.0, True, id="just-used"),
        pytest.param("c1", WARM_FOR_SECONDS - 1, True, id="within-the-window"),
        pytest.param("c1", WARM_FOR_SECONDS, False, id="idle-too-long"),
        pytest.param("c2", 0.0, False, id="another-container"),
    ],
)
def test_a_used_builder_is_warm_in_the_same_container_for_a_while(
    container: str, later: float, warm: bool
) -> None:
    clock = Clock()
    builders = BuilderWarmth(clock)
    builders.used("s1", "c1")
    clock.now += later
    assert builders.is_warm("s1", container) is warm
    assert not builders.is_warm("s2", container)  # per sandbox


def test_forgetting_makes_it_cold_until_it_is_used_again() -> None:
    builders = BuilderWarmth(Clock())
    builders.used("s1", "c1")
    builders.forget("s1")
    assert not builders.is_warm("s1", "c1")
    builders.forget("s1")  # twice is fine
    builders.used("s1", "c1")
    assert builders.is_warm("s1", "c1")
