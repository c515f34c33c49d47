"""``kiln doctor`` on a swarm (``KILN_SANDBOX_BACKEND=swarm``): one line per node of the swarm
``DOCKER_HOST`` manages, with its engine, capacity, images and the hardening a node must provide,
read from a probe sandbox placed there (``sandbox.swarm_node_reports``; docs/cluster.md, "What
`kiln doctor` checks per node"). Nothing on the single Docker engine."""

from __future__ import annotations

from collections.abc import Mapping

from app.cli.doctor_result import CheckResult
from sandbox import SandboxError, SandboxSettings, SwarmSettings, swarm_node_reports


async def check_swarm(env: Mapping[str, str]) -> list[CheckResult]:
    """The swarm's nodes, one result each (none unless the backend is ``swarm``)."""
    try:
        settings = SandboxSettings.from_env(env)
    except ValueError as exc:
        return [CheckResult("swarm", False, str(exc), "fix the setting")]
    if settings.backend != "swarm":
        return []
    try:
        reports = await swarm_node_reports(settings)
    except SandboxError as exc:
        return [CheckResult("swarm", False, str(exc), "point DOCKER_HOST at a swarm manager")]
    if not reports:
        return [CheckResult("swarm", False, "the swarm has no nodes", "join nodes to it")]
    return [
        CheckResult(f"swarm node {report.node}", report.ok, report.detail, report.hint)
        for report in reports
    ]


def image_source(env: Mapping[str, str]) -> str | None:
    """On a swarm, the engine kiln builds and keeps its images on (``KILN_SWARM_IMAGE_SOURCE``:
    the manager only has those some sandbox needed); None on a single engine or when the
    settings do not read (the swarm line says why)."""
    try:
        if SandboxSettings.from_env(env).backend != "swarm":
            return None
        return SwarmSettings.from_env(env).image_source
    except ValueError:
        return None
