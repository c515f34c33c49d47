"""tests/cluster/nodes.py itself: clusters of ended runs are removed, live ones are kept, and a
person's command line refuses what it cannot remove safely."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cluster import nodes
from tests.cluster.conftest import leftovers

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster-nodes"


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_cluster_whose_run_ended_is_removed_and_a_live_one_kept(
    swarm_cluster: nodes.Cluster,
) -> None:
    stale = nodes.up(1, owner=ended_pid())
    try:
        removed = nodes.remove_stale()
        assert f"netns {stale.prefix}-n0" in removed
        assert not leftovers(stale.prefix)
        assert leftovers(swarm_cluster.prefix)  # the session's cluster is still there
        assert all(nodes.engine_answers(node) for node in swarm_cluster.nodes)
    finally:
        nodes.down(stale)


def test_the_command_line_removes_only_a_named_cluster() -> None:
    for args, words in [((), "say which cluster"), (("other-thing",), "not a cluster prefix")]:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "down", *args], capture_output=True, text=True
        )
        assert (result.returncode, words in result.stderr) == (2, True), result.stderr
