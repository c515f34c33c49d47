"""Live progress of a run on a terminal: one line per step, prose and thinking as they stream.

An install can take minutes on a slow registry while npm prints nothing: :meth:`keep_alive`
then says it still runs (``installing zustand… 20 s``) whenever no line was printed for
:data:`HEARTBEAT_SECONDS`, so a quiet terminal never looks like a hung one.

What the app's page said in a browser (issue 23: ``preview_error`` events, the ``postgen``
event's ``render`` check) is printed one line per error: its kind, the first line of its
message and where (``src/App.jsx:12:5``). That text comes from the app's own page, so its
control characters are replaced: a message cannot drive the terminal with escape sequences.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TextIO

import anyio

HEARTBEAT_SECONDS = 10.0  # the longest silence while an install runs
TICK_SECONDS = 1.0  # how often keep_alive looks
PREVIEW_MESSAGE_CHARS = 300  # of a preview error's message on its one line
RENDER_ERRORS_SHOWN = 10  # the render check's errors listed; the rest are counted
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def describe_preview_error(error: dict[str, Any]) -> str:
    """One line for a preview error: ``[uncaught] message (src/App.jsx:12:5) (2 times)``."""
    first = str(error.get("message") or "").split("\n", 1)[0].strip()
    if len(first) > PREVIEW_MESSAGE_CHARS:
        first = first[: PREVIEW_MESSAGE_CHARS - 1] + "…"
    text = f"[{error.get('kind', 'error')}] {first}"
    source = error.get("source")
    if isinstance(source, dict) and source.get("file"):
        where = ":".join(str(source[k]) for k in ("file", "line", "column") if source.get(k))
        text += f" ({where})"
    count = error.get("count")
    if isinstance(count, int) and count > 1:
        text += f" ({count} times)"
    return _CONTROL.sub("?", text)


def _preview_key(error: dict[str, Any]) -> str:
    """What makes two reports the same error (the contract's dedup key)."""
    return repr((error.get("kind"), error.get("message"), error.get("source")))


class ProgressPrinter:
    """Turns run events into readable progress lines on ``out`` (stderr for ``kiln run``)."""

    def __init__(
        self,
        out: TextIO,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        self._out = out
        self._in_line = False  # streamed text is on the current line
        self._sizes: dict[str, int] = {}
        self._clock = clock
        self._heartbeat = heartbeat
        self._last_line = clock()
        self._installs: dict[str, float] = {}  # packages of each running install: its start
        self._preview_seen: set[str] = set()  # preview errors printed: the check's not again

    def tick(self) -> None:
        """Say which installs still run when nothing was printed for the heartbeat period."""
        now = self._clock()
        if not self._installs or now - self._last_line < self._heartbeat:
            return
        for packages, started in self._installs.items():
            self.line(f"  installing {packages}… {now - started:.0f} s")

    async def keep_alive(self, period: float = TICK_SECONDS) -> None:
        """:meth:`tick` every ``period`` seconds until cancelled (run beside the run)."""
        while True:
            await anyio.sleep(period)
            self.tick()

    async def show(self, event: dict[str, Any]) -> None:
        """Print what ``event`` means for the person watching."""
        kind = event["type"]
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(event)

    def line(self, text: str) -> None:
        """A whole line (also used for image-build progress)."""
        if self._in_line:
            self._out.write("\n")
            self._in_line = False
        self._out.write(text + "\n")
        self._out.flush()
        self._last_line = self._clock()

    def _stream(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()
        self._in_line = not text.endswith("\n")

    def _on_turn_start(self, event: dict[str, Any]) -> None:
        what = "fix-up turn" if event.get("fixup") else "turn"
        self.line(f"── {what} {event['turn']}")

    def _on_thinking_start(self, event: dict[str, Any]) -> None:
        self._stream("thinking: ")

    def _on_thinking_content(self, event: dict[str, Any]) -> None:
        self._stream(event["content"])

    def _on_thinking_end(self, event: dict[str, Any]) -> None:
        self.line("")

    def _on_text(self, event: dict[str, Any]) -> None:
        if not event["content"].isspace():
            self._stream(event["content"])

    def _on_file_start(self, event: dict[str, Any]) -> None:
        self._sizes[event["path"]] = 0
        self.line(f"  writing {event['path']}")

    def _on_file_content(self, event: dict[str, Any]) -> None:
        self._sizes[event["path"]] = self._sizes.get(event["path"], 0) + len(event["content"])

    def _on_file_written(self, event: dict[str, Any]) -> None:
        self.line(f"  ✓ {event['path']} ({self._sizes.get(event['path'], 0)} chars)")

    def _on_install_started(self, event: dict[str, Any]) -> None:
        packages = " ".join(event["packages"])
        self._installs[packages] = self._clock()
        self.line(f"  installing {packages}")

    def _on_install_finished(self, event: dict[str, Any]) -> None:
        packages = " ".join(event["packages"])
        self._installs.pop(packages, None)
        self.line(f"  installed {packages} (exit {event['exit_code']})")

    def _on_command_started(self, event: dict[str, Any]) -> None:
        self.line(f"  $ {' '.join(event['argv'])}")

    def _on_output(self, event: dict[str, Any]) -> None:
        self.line(f"    {event['line']}")

    def _on_command_finished(self, event: dict[str, Any]) -> None:
        self.line(f"  exit {event['exit_code']}: {' '.join(event['argv'])}")

    def _on_tool_result(self, event: dict[str, Any]) -> None:
        state = "ok" if event["ok"] else "failed"
        self.line(f"  {event['tool']} {event['request']!r}: {state}")

    def _on_error(self, event: dict[str, Any]) -> None:
        self.line(f"  ! [{event['code']}] {event['message']}")

    def _on_warning(self, event: dict[str, Any]) -> None:
        self.line(f"  ! {event.get('message', event)}")

    def _on_turn_end(self, event: dict[str, Any]) -> None:
        detail = event.get("reason") or event.get("prompt")
        self.line(f"── turn {event['turn']}: {event['decision']} ({detail})")

    def _on_postgen(self, event: dict[str, Any]) -> None:
        for fix in event["fixes"]:
            self.line(f"  fixed {fix['path']}: {fix['message']}")
        for finding in event["findings"]:
            self.line(f"  problem {finding['path']}: [{finding['code']}] {finding['message']}")
        build = event.get("build")
        if build is not None:
            self.line(f"  build {'passed' if build['ok'] else 'failed'}")
        render = event.get("render")
        if render is not None:
            self._render(render)

    def _on_preview_error(self, event: dict[str, Any]) -> None:
        self._preview_seen.add(_preview_key(event))
        self.line(f"  ! preview error {describe_preview_error(event)}")

    def _render(self, render: dict[str, Any]) -> None:
        """The render check's result, then the errors not already printed as they came."""
        if render.get("skipped"):
            reason = _CONTROL.sub("?", str(render.get("message") or render["skipped"]))
            self.line(f"  render check skipped: {reason}")
            return
        errors = [e for e in render.get("errors") or [] if isinstance(e, dict)]
        found = [f"app throws {len(errors)} error{'s' if len(errors) != 1 else ''}"]
        found = found if errors else []
        if render.get("blank"):
            found.append("page blank")
        verdict = ", ".join(found) or ("app renders" if render.get("ok") else "failed")
        seconds = render.get("seconds")
        took = f" ({seconds:.1f} s)" if isinstance(seconds, int | float) else ""
        self.line(f"  render check: {verdict}{took}")
        fresh = [e for e in errors if _preview_key(e) not in self._preview_seen]
        for error in fresh[:RENDER_ERRORS_SHOWN]:
            self.line(f"    {describe_preview_error(error)}")
        if len(fresh) > RENDER_ERRORS_SHOWN:
            self.line(f"    … and {len(fresh) - RENDER_ERRORS_SHOWN} more")
        if render.get("screenshot"):
            self.line(f"    screenshot: {_CONTROL.sub('?', str(render['screenshot']))}")
