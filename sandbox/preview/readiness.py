"""Is a sandbox's preview ready? One short request to its dev server, answered in words.

The web UI shows the preview's state from this (``GET /api/sandboxes/{id}/preview``), not from
its frame having loaded *something*: a frame also "loads" the proxy's retrying page or an error.
The probe asks for ``/`` like a browser navigating would, on a client of its own (no keep-alive
connection is reused), bounded by ``timeout``:

- ``ready``: the dev server answered with anything but a server error;
- ``starting``: it does not accept connections yet, or sent no response headers in time;
- ``failing``: it answered ``5xx`` (the message names the status) or broke the exchange.

Messages name the sandbox, never the dev server's internal address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

from sandbox.preview.proxy import RETRYABLE_STATUSES, transport_refusal

PROBE_TIMEOUT_SECONDS = 3.0
# What a browser loading the page sends, so the dev server answers as it would to the frame.
PROBE_HEADERS = {"accept": "text/html", "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"}
ReadinessState = Literal["ready", "starting", "failing"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """A preview's state, with a stable code and a message in words."""

    state: ReadinessState
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The JSON the API answers with."""
        return {"state": self.state, "code": self.code, "message": self.message}


async def probe_preview(
    base_url: str, sandbox_id: str, timeout: float = PROBE_TIMEOUT_SECONDS
) -> Readiness:
    """Ask the dev server at ``base_url`` for ``/`` once; how ready is the preview?"""
    # trust_env=False: a proxy from the environment must never see sandbox traffic.
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        try:
            response = await client.get(f"{base_url.rstrip('/')}/", headers=PROBE_HEADERS)
        except httpx.TransportError as exc:  # the proxy's rule: what the browser would get
            refusal = transport_refusal(exc, sandbox_id)
            state: ReadinessState = (
                "starting" if refusal.status in RETRYABLE_STATUSES else "failing"
            )
            return Readiness(state, refusal.code, refusal.message)
    if response.status_code >= 500:
        msg = f"the dev server of sandbox {sandbox_id!r} answers HTTP {response.status_code}"
        return Readiness("failing", "preview_upstream_error", msg)
    msg = f"the dev server of sandbox {sandbox_id!r} is up"
    return Readiness("ready", "preview_ready", msg)
