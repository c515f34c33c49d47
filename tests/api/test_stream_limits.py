"""A bounded number of live event streams per user; everybody else is not starved by one."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from app.api.stream_limits import StreamLimits
from app.errors import AdmissionRefused
from tests.api.conftest import Api
from tests.api.harness import sse_frames
from tests.api.test_runs import start_run

pytestmark = pytest.mark.anyio
LIMIT = 20  # ApiSettings' default, which the api fixture keeps


def test_a_place_is_held_while_the_block_runs_and_freed_after() -> None:
    limits = StreamLimits(2)
    with limits.held("ann"), limits.held("ann"):
        assert limits.open_for("ann") == 2
        with (
            pytest.raises(AdmissionRefused, match="2 live event streams") as refused,
            limits.held("ann"),
        ):
            pass
        assert (refused.value.limit, refused.value.retry_after) == ("event_streams", 5)
        with limits.held("bob"):
            assert limits.open_for("bob") == 1
    assert limits.open_for("ann") == 0


async def test_one_user_past_the_limit_gets_429_and_others_are_served(api: Api) -> None:
    run_id = await start_run(api)
    # Each stream's frame reader is kept: a dropped async generator is closed by the event
    # loop, and closing it closes the response, which would end the stream.
    readers = []
    async with contextlib.AsyncExitStack() as streams:
        with anyio.fail_after(30):
            for _ in range(LIMIT):
                response = await streams.enter_async_context(
                    api.alice.client.stream("GET", f"/api/runs/{run_id}/events")
                )
                assert response.status_code == 200
                readers.append(sse_frames(response))
                await anext(readers[-1])
            refused = await api.alice.client.get(f"/api/runs/{run_id}/events")
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert (error["code"], error["limit"]) == ("admission_refused", "event_streams")
            assert "live event streams" in error["message"]
            bob_run = await start_run(api, api.bob)
            async with api.bob.client.stream("GET", f"/api/runs/{bob_run}/events") as other:
                assert other.status_code == 200
            assert (await api.anonymous.get("/healthz")).status_code == 200
    with anyio.fail_after(30):
        while True:  # the places are freed as the streams close
            async with api.alice.client.stream("GET", f"/api/runs/{run_id}/events") as again:
                if again.status_code == 200:
                    break
            await anyio.sleep(0.05)
