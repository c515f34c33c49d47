"""app/web/api.js is the web UI's one way to the HTTP API: no other module calls ``fetch``."""

from __future__ import annotations

import re
from pathlib import Path

WEB = Path(__file__).resolve().parents[2] / "app" / "web"
RAW_CALL = re.compile(r"\b(?:fetch|XMLHttpRequest|sendBeacon)\s*\(|new\s+XMLHttpRequest\b")


def test_only_api_js_calls_fetch() -> None:
    modules = sorted(WEB.glob("*.js"))
    assert WEB / "api.js" in modules
    raw = [
        f"{path.name}:{number}: {line.strip()}"
        for path in modules
        if path.name != "api.js"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RAW_CALL.search(line)
    ]
    assert not raw, "HTTP calls outside app/web/api.js (use its request()):\n" + "\n".join(raw)
