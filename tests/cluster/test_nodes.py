"""tests/cluster/nodes.py itself: clusters of ended runs are removed, live ones are kept, and a
person's command line refuses what it cannot remove safely."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cluster import nodes
from tests.cluster.leftovers import remaining, remove_stale

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster-nodes"


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_cluster_whose_run_ended_is_removed_and_a_live_one_kept() -> None:
    # Two small clusters of its own (one node, no images): this module needs no session cluster,
    # so a test process that runs only this module starts none.
    stale = nodes.up(1, owner=ended_pid())
    live = nodes.up(1, owner=os.getpid())
    try:
        removed = remove_stale()
        assert f"netns {stale.prefix}-n0" in removed
        assert not remaining(stale.prefix)
        assert not [item for item in removed if live.prefix in item]
        assert nodes.engine_answers(live.manager)
    finally:
        nodes.down(stale)
        nodes.down(live)
    assert not remaining(live.prefix)


def test_the_command_line_removes_only_a_named_cluster() -> None:
    for args, words in [((), "say which cluster"), (("other-thing",), "not a cluster prefix")]:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "down", *args], capture_output=True, text=True
        )
        assert (result.returncode, words in result.stderr) == (2, True), result.stderr
