"""A run's status from its stop reason and post-generation."""

from __future__ import annotations

import pytest

from app.agent.run_result import RunResult, run_status
from app.agent.turn_outcome import StopReason


@pytest.mark.parametrize(
    ("reason", "postgen_ok", "status"),
    [
        pytest.param(StopReason.CANCELLED, False, "cancelled", id="cancel-wins"),
        pytest.param(StopReason.ERROR, None, "failed", id="error"),
        pytest.param(StopReason.NO_OUTPUT, None, "failed", id="no-output"),
        pytest.param(StopReason.DONE, False, "failed", id="postgen-findings"),
        pytest.param(StopReason.DONE, True, "completed", id="postgen-ok"),
        pytest.param(StopReason.DONE, None, "completed", id="no-postgen"),
    ],
)
def test_the_status_says_how_the_run_ended(
    reason: StopReason, postgen_ok: bool | None, status: str
) -> None:
    assert run_status(reason, postgen_ok) == status


def test_the_result_is_json_ready() -> None:
    result = RunResult("completed", "done", 1, [], [], [], None, None, None, None, {}, [])
    assert result.to_dict()["unchanged"] is False
