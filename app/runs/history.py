"""What a run takes from its chat (the conversation so far) and gives back (the reply's text)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from app.agent.loop import EMPTY_ANSWER
from app.agent.selection import selection_of, user_turn
from app.providers import Message as PromptMessage
from app.store import Message


def chat_history(messages: Sequence[Message], before_id: str | None) -> tuple[PromptMessage, ...]:
    """The chat's exchanges before message ``before_id``, as the provider's messages.

    Only complete exchanges are kept (a request followed by its reply): a request whose run
    failed without a reply would leave two user messages in a row, which providers refuse.
    Images of earlier messages are not sent again (each costs up to ~1,600 tokens per turn);
    their request says how many it had, so the model knows the person showed something.
    """
    earlier: list[Message] = []
    for message in messages:
        if message.id == before_id:
            break
        earlier.append(message)
    history: list[PromptMessage] = []
    for request, reply in itertools.pairwise(earlier):
        if request.role == "user" and reply.role == "assistant":
            asked = user_turn(request.content, selection_of(request.data))
            history.append(PromptMessage("user", asked + _images_note(request)))
            history.append(PromptMessage("assistant", reply.content or EMPTY_ANSWER))
    return tuple(history)


def _images_note(message: Message) -> str:
    count = len(message.images)
    return f"\n\n({count} image(s) were attached here; not shown again.)" if count else ""


def reply_text(texts: Mapping[int, Sequence[str]]) -> str:
    """The assistant's reply: each turn's prose, turns separated by a blank line."""
    turns = ("".join(texts[turn]).strip() for turn in sorted(texts))
    return "\n\n".join(text for text in turns if text)
