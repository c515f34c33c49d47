"""A worker process for the crash tests: ``python -m tests.runs.worker_process ROOT RECORDING
TOKENS_PER_SECOND NAME`` (0 tokens per second: no pacing).

It is :func:`app.service.worker_main.serve_worker` (settings from the environment) with the files
written under ``ROOT/<chat id>`` instead of a sandbox (ROOT ``sandbox``: into real sandboxes,
with projects, as a served worker does), and the recording replayed at the given pace, so the
test can kill it mid-run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from app.config import ServiceSettings
from app.service.worker_main import serve_worker
from tests.runs.fakes import folder_workspaces, replay_factory

SANDBOXES = "sandbox"  # the ROOT that asks for real sandboxes


def main() -> None:
    """Serve until killed."""
    root, recording, pace = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]) or None
    settings = ServiceSettings.from_env()
    anyio.run(
        lambda: serve_worker(
            settings,
            name=f"crash-test-{sys.argv[4]}",
            workspaces=None if str(root) == SANDBOXES else folder_workspaces(root),
            providers=replay_factory(recording, pace),
        )
    )


if __name__ == "__main__":
    main()
