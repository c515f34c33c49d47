"""``kiln doctor``'s firewall check: the host rules of ``scripts/setup.sh`` for kiln bridges.

A sandbox bridge's gateway is a host address, so the host's INPUT chain decides what a sandbox
reaches on the host: nothing (a SYN drop, and a drop of everything but replies) except kiln's
npm proxy on ``KILN_NPM_PROXY_PORT`` of the sandbox's own bridge gateway (``-m addrtype
--dst-type LOCAL --limit-iface-in``: every other instance's gateway is a host address too, and
sandboxes have a default route to theirs). That ACCEPT must come before the SYN drop or it
matches nothing; the older opening without a destination lets a sandbox reach every instance's
proxy, and fails the check. The check reads ``iptables -S INPUT``; where that cannot be read
(no iptables, not root) it says so and passes: the npm check still proves the proxy is reachable.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from app.cli.doctor_result import CheckResult
from sandbox import SandboxSettings

TIMEOUT_SECONDS = 5.0
SYN_DROP = "-A INPUT -i kiln+ -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j DROP"
OTHER_DROP = "-A INPUT -i kiln+ ! -p tcp -m conntrack ! --ctstate RELATED,ESTABLISHED -j DROP"
HINT = "run scripts/setup.sh as root (it adds the kiln+ rules in the right order)"


def proxy_accept(port: int) -> str:
    """The rule (as ``iptables -S`` prints it) that lets sandboxes reach the npm proxy."""
    return (
        f"-A INPUT -i kiln+ -p tcp -m tcp --dport {port}"
        " -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT"
    )


def wide_accept(port: int) -> str:
    """The older opening, to any host address's ``port``: every instance's proxy."""
    return f"-A INPUT -i kiln+ -p tcp -m tcp --dport {port} -j ACCEPT"


def firewall_result(rules: str, port: int) -> CheckResult:
    """The check's result from ``iptables -S INPUT`` output (pure)."""
    lines = [line.strip() for line in rules.splitlines()]
    missing = [rule for rule in (SYN_DROP, OTHER_DROP) if rule not in lines]
    if missing:
        detail = "sandboxes may reach host services: missing " + "; ".join(missing)
        return CheckResult("firewall", False, detail, HINT)
    wide = wide_accept(port)
    if wide in lines and lines.index(wide) < lines.index(SYN_DROP):
        detail = f"sandboxes reach every kiln instance's npm proxy on this host: `{wide}`"
        return CheckResult("firewall", False, detail, HINT)
    accept = proxy_accept(port)
    if accept not in lines or lines.index(accept) > lines.index(SYN_DROP):
        detail = f"sandboxes cannot reach kiln's npm proxy: no `{accept}` before the SYN drop"
        return CheckResult("firewall", False, detail, HINT)
    return CheckResult(
        "firewall",
        True,
        f"kiln+ bridges reach only the npm proxy (port {port}) on their own gateway",
    )


def check_firewall(env: Mapping[str, str]) -> CheckResult:
    """Read the INPUT chain and judge it (blocking: run it in a thread)."""
    try:
        port = SandboxSettings.from_env(env).npm_proxy_port
    except ValueError as exc:  # SandboxConfigError names the setting
        return CheckResult("firewall", False, str(exc), "fix the setting it names")
    iptables = shutil.which("iptables")
    if iptables is None:
        return CheckResult("firewall", True, "not checked: no iptables on this host")
    try:
        listed = subprocess.run(
            [iptables, "-S", "INPUT"], capture_output=True, text=True, timeout=TIMEOUT_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CheckResult("firewall", True, f"not checked: iptables failed ({exc})")
    if listed.returncode != 0:
        reason = (listed.stderr.strip().splitlines() or ["no output"])[0]
        return CheckResult("firewall", True, f"not checked: {reason}")
    return firewall_result(listed.stdout, port)
