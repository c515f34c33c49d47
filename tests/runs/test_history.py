"""The conversation a run is given, and the reply text it leaves."""

from __future__ import annotations

from app.providers import Message as PromptMessage
from app.runs.history import chat_history, reply_text
from app.store import Message
from app.store.models import ImageInfo


def message(index: int, role: str, content: str) -> Message:
    return Message(f"m{index}", "c", role, content, None, float(index))


def test_history_keeps_complete_exchanges_before_the_request() -> None:
    messages = [
        message(1, "user", "make a todo app"),
        message(2, "assistant", "Here it is."),
        message(3, "user", "this one failed"),  # no reply: left out
        message(4, "user", "add dark mode"),
        message(5, "assistant", ""),
        message(6, "user", "now the request"),
        message(7, "assistant", "later"),
    ]
    assert chat_history(messages, "m6") == (
        PromptMessage("user", "make a todo app"),
        PromptMessage("assistant", "Here it is."),
        PromptMessage("user", "add dark mode"),
        PromptMessage("assistant", "(no answer)"),
    )
    assert chat_history(messages, "m1") == ()


def test_the_reply_joins_each_turns_text() -> None:
    assert reply_text({2: ["Then ", "this."], 1: [" First. "], 3: []}) == "First.\n\nThen this."
    assert reply_text({}) == ""


def test_earlier_images_are_not_sent_again_but_the_history_says_they_were_there() -> None:
    shown = ImageInfo("i1", "image/png", 120)
    asked = Message("m1", "c", "user", "like this", None, 1.0, (shown, shown))
    messages = [asked, message(2, "assistant", "Done."), message(3, "user", "now red")]
    [request, _reply] = chat_history(messages, "m3")
    assert request == PromptMessage(
        "user", "like this\n\n(2 image(s) were attached here; not shown again.)"
    )
    assert request.images == ()
