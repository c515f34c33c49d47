"""Stop benchmark: a real ``kiln serve`` stopped at twenty moments of the demo run (never a test).

kiln issue 24: a server stopped mid-run must exit within the stop's bound (``KILN_STOP_LIMIT``,
15 s), leave no process behind (its embedded redis-server included) and no container or
network of its instance (parked: volumes kept), and the next start must serve the chats. One
data directory and instance for the whole sequence, one server per stop
(tests/app/stop_moments.py): each server first checks the chats of the earlier ones (listed,
readable, the last one's sandbox files served), cancels the run the last stop interrupted, sends
the demo message in a new chat and is stopped at the next moment, SIGTERM and SIGINT (to its
process group, as Ctrl+C) in turn. A last server resumes the last interrupted run to its end.
tests/app/test_clean_stop.py runs three of these moments on every test run.

Printed per stop: the moment (an event of the run, then a delay), the last event the run had
sent, the signal, seconds from the signal to the end of the run's event stream and to the exit,
the exit code (1 = the deadline had to end it), processes and Docker objects left. Then the
worst exit time against the bound, with ``uptime`` before and after.

    python bench/stops.py [--stops 20] [--instance bench-stops-<random>]
"""

from __future__ import annotations

import argparse
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.service.embedded_redis import EmbeddedRedis
from tests.app.stop_moments import POSTED, STOP_LIMIT_SECONDS, Moment, Stopped, StopSequence
from tests.sandbox.docker_support import sweep

# Spread over the demo run's phases: queued, thinking, sandbox, files streaming, install,
# version, build and post-generation, just finished.
MOMENTS = (
    Moment(POSTED),
    Moment("run_started"),
    Moment("thinking_start", 0.5),
    Moment("sandbox_ready"),
    Moment("sandbox_start", 0.5),
    Moment("sandbox_start", 3.0),
    Moment("sandbox_start", 6.0),
    Moment("sandbox_start", 9.0),
    Moment("sandbox_start", 12.0),
    Moment("sandbox_end"),
    Moment("done"),
    Moment("done", 2.0),
    Moment("done", 5.0),
    Moment("install_finished"),
    Moment("version"),
    Moment("version", 2.0),
    Moment("version", 6.0),
    Moment("version", 12.0),
    Moment("command_started"),
    Moment("run_finished", 1.0),
)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def row(number: int, stopped: Stopped) -> str:
    """One stop as a table row."""
    left = len(stopped.processes_left) + len(stopped.objects_left)
    return (
        f"{number:>3} {stopped.moment!s:<22} {stopped.reached:<18} {stopped.signum.name:<8}"
        f"{stopped.stream_seconds:>8.2f}{stopped.seconds:>8.2f}{stopped.code:>6}{left:>6}"
    )


def uptime() -> str:
    """What ``uptime`` says."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run(folder: Path, instance: str, count: int) -> None:
    """The stops, the resumed run, the summary."""
    sequence = StopSequence(folder, instance)
    print(f"{'#':>3} {'moment':<22} {'reached':<18} {'signal':<8}{'stream':>8}{'exit':>8}", end="")
    print(f"{'code':>6}{'left':>6}")
    results = []
    for number, moment in enumerate(MOMENTS[:count]):
        stopped = sequence.stop_at(f"stop{number}", moment, SIGNALS[number % 2])
        results.append(stopped)
        print(row(number, stopped), flush=True)
        for item in stopped.processes_left + stopped.objects_left:
            print(f"      left: {item}")
    print(f"the last interrupted run, resumed by the next start: {sequence.finish_last()}")
    worst = max(s.seconds for s in results)
    clean = sum(1 for s in results if s.code == 0 and not s.processes_left and not s.objects_left)
    print(f"worst exit {worst:.2f} s (bound {STOP_LIMIT_SECONDS:g} s);", end=" ")
    print(f"{clean} of {len(results)} stops exited 0 leaving nothing running")


async def sweep_all(folder: Path, instance: str) -> None:
    """Remove the instance's Docker objects and registry (its Redis is the data dir's)."""
    async with EmbeddedRedis(folder / "data") as embedded:
        client = docker.from_env()
        try:
            sweep(client, instance, embedded.url)
        finally:
            client.close()


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=len(MOMENTS), help="how many moments")
    parser.add_argument(
        "--instance", default=f"bench-stops-{secrets.token_hex(3)}", help="KILN_INSTANCE"
    )
    args = parser.parse_args()
    before = uptime()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-stops-") as root:
        try:
            run(Path(root), args.instance, args.stops)
        finally:
            anyio.run(sweep_all, Path(root), args.instance)
    print(f"load before: {before}\nload after:  {uptime()}")


if __name__ == "__main__":
    main()
