"""``kiln doctor``'s firewall check, judged from ``iptables -S INPUT`` output."""

from __future__ import annotations

import pytest

from app.cli.doctor_firewall import (
    OTHER_DROP,
    SYN_DROP,
    firewall_result,
    proxy_accept,
    wide_accept,
)

ACCEPT = proxy_accept(4873)
POLICY = "-P INPUT ACCEPT"


def _rules(*rules: str) -> str:
    return "\n".join([POLICY, *rules]) + "\n"


def test_the_proxy_opening_before_both_drops_passes() -> None:
    result = firewall_result(_rules(ACCEPT, SYN_DROP, OTHER_DROP), 4873)
    assert (result.name, result.ok) == ("firewall", True)
    assert "port 4873" in result.detail
    assert "own gateway" in result.detail


def test_the_rule_text_is_what_iptables_prints() -> None:
    """setup.sh's rule as this host's iptables lists it (the check compares text)."""
    assert ACCEPT == (
        "-A INPUT -i kiln+ -p tcp -m tcp --dport 4873"
        " -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT"
    )


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        pytest.param((ACCEPT, OTHER_DROP), "may reach host services", id="no-syn-drop"),
        pytest.param((ACCEPT, SYN_DROP), "may reach host services", id="no-other-drop"),
        pytest.param((SYN_DROP, OTHER_DROP), "cannot reach kiln's npm proxy", id="no-opening"),
        pytest.param(
            (SYN_DROP, ACCEPT, OTHER_DROP), "cannot reach kiln's npm proxy", id="opening-too-late"
        ),
        pytest.param((proxy_accept(4999), SYN_DROP, OTHER_DROP), "cannot reach", id="another-port"),
        pytest.param(
            (wide_accept(4873), SYN_DROP, OTHER_DROP), "every kiln instance", id="no-destination"
        ),
        pytest.param(
            (ACCEPT, wide_accept(4873), SYN_DROP, OTHER_DROP),
            "every kiln instance",
            id="old-opening-left-beside-the-new",
        ),
    ],
)
def test_a_missing_or_misplaced_rule_fails_with_a_hint(rules: tuple[str, ...], says: str) -> None:
    result = firewall_result(_rules(*rules), 4873)
    assert not result.ok
    assert says in result.detail
    assert "scripts/setup.sh" in result.hint
