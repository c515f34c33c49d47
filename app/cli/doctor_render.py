"""``kiln doctor``'s render check row: whether the check after each run (issue 23) can run.

Off (``KILN_RENDER_CHECK=0``) passes and says so. On, the render browser is started the way a
check starts it (:func:`sandbox.probe_render_browser`: the same confinement, no network) on an
empty page; a missing image or a browser that does not start fails with the words of the check's
own skip and a hint. On a swarm it runs on kiln's image source, from where a sandbox's node gets
the browser at its first check (:meth:`sandbox.SandboxManager.engine_beside`).
"""

from __future__ import annotations

from collections.abc import Mapping

import docker

from app.cli.doctor_result import CheckResult
from sandbox import EnvReader, RenderCheckSettings, SandboxSettings, probe_render_browser

NAME = "render check"
HINT = "build the images (`kiln images build`), or turn the check off with KILN_RENDER_CHECK=0"


async def check_render(client: docker.DockerClient | None, env: Mapping[str, str]) -> CheckResult:
    """The render check's row (see the module docstring)."""
    try:
        settings = RenderCheckSettings.from_env(EnvReader(env))
        instance = SandboxSettings.from_env(env).instance
    except ValueError as exc:  # a malformed setting, named in the message
        return CheckResult(NAME, False, str(exc), "fix the setting it names")
    if not settings.enabled:
        return CheckResult(NAME, True, "off (KILN_RENDER_CHECK=0): runs end at the build")
    if client is None:
        return CheckResult(NAME, False, "not checked: Docker is unavailable", "fix Docker")
    report = await probe_render_browser(client, settings, instance=instance)
    if report.skipped is not None:
        return CheckResult(NAME, False, f"{report.skipped}: {report.skipped_message}", HINT)
    detail = f"the render browser starts confined and loads a page ({report.seconds:.1f} s)"
    return CheckResult(NAME, True, detail)
