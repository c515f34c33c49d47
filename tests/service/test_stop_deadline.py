"""The stop's deadline ends a process whose stop is stuck: its event loop spinning (as the
``__context__`` cycle of kiln issue 24 made it) or a thread that never returns; the last
resorts (stopping the embedded Redis) run first. A real process, since the point is its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.service.stop_deadline import EXIT_FORCED, StopDeadline

WAIT_LIMIT_SECONDS = 60.0  # far beyond the deadline: only a process that never ends fails
STUCK = """
import sys, threading
from pathlib import Path
from app.service.stop_deadline import StopDeadline

deadline = StopDeadline(0.5)
deadline.last_resort(lambda: Path(sys.argv[1]).write_text("stopped redis"))
deadline.stage("parking the sandboxes")
deadline.begin()
threading.Thread(target=threading.Event().wait).start()  # a non-daemon thread that never ends
while True:
    pass
"""


def test_a_stuck_stop_ends_at_the_deadline_after_the_last_resorts(tmp_path: Path) -> None:
    marker = tmp_path / "resort"
    done = subprocess.run(
        [sys.executable, "-c", STUCK, str(marker)],
        capture_output=True,
        text=True,
        timeout=WAIT_LIMIT_SECONDS,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == EXIT_FORCED, done.stderr
    assert marker.read_text() == "stopped redis"
    assert "while parking the sandboxes" in done.stderr  # the log says where it was stuck


def test_the_whole_limit_remains_until_the_stop_begins() -> None:
    deadline = StopDeadline(30.0)
    assert not deadline.started
    assert deadline.remaining() == 30.0
