// The list of the user's chats, newest first; the open chat is marked `aria-current`. Each chat
// has Rename (its title becomes an input: Enter or leaving it saves, Escape keeps the old
// title) and Delete (the caller confirms first) buttons.

import { h } from "./dom.js";

/**
 * Render `chats` into `list`; each links to `#/chats/<id>`.
 * @param {{rename: (chat, title: string) => Promise<void>, remove: (chat) => void} | null} actions
 */
export function renderChatList(list, chats, currentId, actions = null) {
  if (!chats.length) {
    list.replaceChildren(h("li", { class: "chat-empty" }, "No chats yet."));
    return;
  }
  list.replaceChildren(...chats.map((chat) => chatItem(chat, chat.id === currentId, actions)));
}

function chatItem(chat, current, actions) {
  const title = chat.title || "Untitled chat";
  const link = h("a", { href: `#/chats/${encodeURIComponent(chat.id)}`, class: "chat-link", "aria-current": current ? "page" : null, dataset: { chat: chat.id } },
    h("span", { class: "chat-title" }, title),
    h("span", { class: "chat-time" }, when(chat.created)));
  const item = h("li", { class: "chat-item" }, link);
  if (!actions) return item;
  item.append(h("span", { class: "chat-actions" },
    h("button", { type: "button", class: "chat-action", title: "Rename", "aria-label": `Rename chat “${title}”`, onclick: () => editTitle(item, chat, actions) }, "✎"),
    h("button", { type: "button", class: "chat-action", title: "Delete", "aria-label": `Delete chat “${title}”`, onclick: () => actions.remove(chat) }, "✕")));
  return item;
}

/** Replace the chat's link with an input holding its title until the edit ends. */
function editTitle(item, chat, actions) {
  const input = h("input", { type: "text", class: "chat-title-input", value: chat.title || "", maxlength: "200", "aria-label": "Chat title" });
  const form = h("form", { class: "chat-rename" }, input);
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    if (save && title && title !== chat.title) {
      input.disabled = true;
      await actions.rename(chat, title); // re-renders the list (or says why not)
    }
    form.replaceWith(...children);
  };
  const children = [...item.children];
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    finish(true);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      finish(false);
    }
  });
  input.addEventListener("blur", () => finish(true));
  item.replaceChildren(form);
  input.focus();
  input.select();
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
