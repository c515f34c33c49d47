// The model's prose as safe HTML: everything is escaped first, then a small subset of
// markdown is recognised (paragraphs, `-`/`1.` lists, `#` headings, fenced code, `code` and
// **bold**). Unfinished input (a fence still open) renders as what it is so far.

import { escapeHtml } from "./highlight.js";

function inline(text) {
  return escapeHtml(text)
    .replace(/`([^`\n]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
}

function listHtml(lines, ordered) {
  const tag = ordered ? "ol" : "ul";
  const items = lines.map((line) => `<li>${inline(line.replace(/^\s*(?:[-*]|\d+\.)\s+/, ""))}</li>`);
  return `<${tag}>${items.join("")}</${tag}>`;
}

function blockHtml(block) {
  const lines = block.split("\n");
  const heading = /^(#{1,4})\s+(.*)$/.exec(block);
  if (heading && lines.length === 1) return `<h4>${inline(heading[2])}</h4>`;
  if (lines.every((l) => /^\s*[-*]\s+/.test(l))) return listHtml(lines, false);
  if (lines.every((l) => /^\s*\d+\.\s+/.test(l))) return listHtml(lines, true);
  return `<p>${lines.map(inline).join("<br>")}</p>`;
}

/** `text` (markdown-ish prose) as HTML safe to assign to innerHTML. */
export function renderProse(text) {
  const out = [];
  const parts = text.split(/^```[^\n]*\n?/m);
  parts.forEach((part, index) => {
    if (index % 2 === 1) {
      out.push(`<pre class="prose-code"><code>${escapeHtml(part.replace(/\n$/, ""))}</code></pre>`);
      return;
    }
    for (const block of part.split(/\n\s*\n/)) {
      if (block.trim()) out.push(blockHtml(block.replace(/^\n+|\n+$/g, "")));
    }
  });
  return out.join("");
}
