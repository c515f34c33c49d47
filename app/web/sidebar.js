// The list of the user's chats, newest first; the open chat is marked `aria-current`.

import { h } from "./dom.js";

/** Render `chats` into `list`; each links to `#/chats/<id>`. */
export function renderChatList(list, chats, currentId) {
  if (!chats.length) {
    list.replaceChildren(h("li", { class: "chat-empty" }, "No chats yet."));
    return;
  }
  list.replaceChildren(
    ...chats.map((chat) =>
      h("li", {},
        h("a", { href: `#/chats/${encodeURIComponent(chat.id)}`, class: "chat-link", "aria-current": chat.id === currentId ? "page" : null, dataset: { chat: chat.id } },
          h("span", { class: "chat-title" }, chat.title || "Untitled chat"),
          h("span", { class: "chat-time" }, when(chat.created)))),
    ),
  );
}

/** A short, human "when" for a UNIX time in seconds. */
export function when(seconds) {
  if (!seconds) return "";
  const date = new Date(seconds * 1000);
  const age = (Date.now() - date.getTime()) / 1000;
  if (age < 60) return "just now";
  if (age < 3600) return `${Math.floor(age / 60)} min ago`;
  if (age < 86400 && date.getDate() === new Date().getDate()) {
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }
  return date.toLocaleDateString([], { month: "short", day: "numeric" });
}
