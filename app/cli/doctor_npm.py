"""``kiln doctor``'s npm checks: can a sandbox reach the npm registry, and with which CA bundle.

- **ca bundle**: the bundle mounted into sandboxes and image builds (``KILN_SANDBOX_CA_BUNDLE``,
  else the host's system bundle), or that there is none; informative, it never fails;
- **npm registry**: ``npm view`` from a short-lived container of the ``vanilla`` image on the
  sandbox network, through the instance's npm proxy, with the settings installs have
  (:func:`sandbox.probe_npm`); fails with npm's own reason (its error code) and a hint about
  the firewall opening, proxies and CA bundles;
- **npm cache**: every kiln npm proxy's cache use and bound on this host against the disk
  (:mod:`app.cli.doctor_npm_cache`).
"""

from __future__ import annotations

from collections.abc import Mapping

import docker

from app.cli.doctor_npm_cache import check_npm_cache
from app.cli.doctor_result import CheckResult
from sandbox import NpmProbe, SandboxError, SandboxSettings, probe_npm

NPM_HINT = (
    "installs will fail: check the firewall rule that lets sandboxes reach kiln's npm proxy "
    "(scripts/setup.sh), the host's route to the registry (KILN_NPM_REGISTRY), and behind "
    "a TLS-inspecting proxy set KILN_SANDBOX_CA_BUNDLE to its CA (PEM)"
)


async def check_npm(
    client: docker.DockerClient | None, env: Mapping[str, str]
) -> list[CheckResult]:
    """The CA bundle in use and the registry's reachability from a sandbox (see above)."""
    try:
        settings = SandboxSettings.from_env(env)
    except ValueError as exc:  # SandboxConfigError: a malformed setting, named in the message
        return [CheckResult("npm registry", False, str(exc), "fix the setting it names")]
    bundle = ca_bundle_result(settings)
    if client is None:
        return [bundle, CheckResult("npm registry", False, "not checked: Docker is unavailable")]
    try:
        probe = await probe_npm(client, settings)
    except SandboxError as exc:
        hint = "build the images (`kiln images build`) and check the Docker engine"
        return [bundle, CheckResult("npm registry", False, f"no probe container: {exc}", hint)]
    return [bundle, npm_result(probe), await check_npm_cache(client, settings)]


def ca_bundle_result(settings: SandboxSettings) -> CheckResult:
    """Which CA bundle sandboxes get (always passes: it says, it does not judge)."""
    if settings.ca_bundle is None:
        return CheckResult("ca bundle", True, "none: sandboxes trust their image's own roots")
    return CheckResult("ca bundle", True, f"{settings.ca_bundle} (mounted into sandboxes)")


def npm_result(probe: NpmProbe) -> CheckResult:
    """The registry check from what the probe found."""
    if probe.ok:
        detail = f"{probe.upstream} answers a sandbox through kiln's npm proxy ({probe.registry})"
        return CheckResult("npm registry", True, detail)
    reason = npm_reason(probe.output)
    if "E404" in reason:  # npm itself always exists: the proxy had no upstream answer, no cache
        reason += " (the npm proxy got no answer from its upstream)"
    detail = f"{probe.upstream} unreachable from a sandbox through {probe.registry}: {reason}"
    return CheckResult("npm registry", False, detail, NPM_HINT)


def npm_reason(output: str) -> str:
    """The line of npm's output that says why: its error code or first error line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("npm error")]
    coded = [line for line in errors if line.startswith(("npm error code", "npm error errno"))]
    return next(iter(coded + errors + lines[-1:]), "no output")
