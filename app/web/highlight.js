// A tiny tokenizer-based syntax highlighter: one alternation regex per language, each group a
// token class. It tolerates unfinished input (a string or comment still streaming in runs to
// the end), which is what a file being written looks like. Output is escaped HTML with
// <span class="tok-..."> around tokens.

const STRING = String.raw`"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?`;
const TEMPLATE = String.raw`\`(?:[^\`\\]|\\[\s\S])*\`?`;
const BLOCK_COMMENT = String.raw`\/\*[\s\S]*?(?:\*\/|$)`;
const KEYWORDS = [
  "import", "from", "export", "default", "const", "let", "var", "function", "return", "if",
  "else", "for", "while", "do", "switch", "case", "break", "continue", "new", "class", "extends",
  "super", "this", "typeof", "instanceof", "in", "of", "async", "await", "try", "catch",
  "finally", "throw", "yield", "delete", "void", "null", "undefined", "true", "false",
  "interface", "type", "enum", "implements", "as", "static",
].join("|");

// [token class, pattern]; earlier entries win where two could match at the same place.
const RULES = {
  js: [
    ["com", String.raw`\/\/[^\n]*|` + BLOCK_COMMENT],
    ["str", `${STRING}|${TEMPLATE}`],
    ["tag", String.raw`<\/?[A-Za-z][\w.-]*|\/>`],
    ["kw", String.raw`\b(?:${KEYWORDS})\b`],
    ["num", String.raw`\b(?:0[xX][\da-fA-F]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?n?)\b`],
    ["fn", String.raw`\b[A-Za-z_$][\w$]*(?=\s*\()`],
  ],
  json: [
    ["prop", String.raw`"(?:[^"\\\n]|\\.)*"(?=\s*:)`],
    ["str", STRING],
    ["kw", String.raw`\b(?:true|false|null)\b`],
    ["num", String.raw`-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b`],
  ],
  css: [
    ["com", BLOCK_COMMENT],
    ["str", STRING],
    ["kw", String.raw`@[\w-]+|!important\b`],
    ["prop", String.raw`(?<=[{;]\s*)-{0,2}[A-Za-z][\w-]*(?=\s*:)`],
    ["num", String.raw`#[\da-fA-F]{3,8}\b|-?\b\d*\.?\d+(?:px|r?em|%|v[hw]|m?s|fr|deg|ch)?\b`],
  ],
  html: [
    ["com", String.raw`<!--[\s\S]*?(?:-->|$)`],
    ["tag", String.raw`<\/?[A-Za-z][\w-]*|\/?>|<!doctype\b`],
    ["attr", String.raw`[\w:@.-]+(?==)`],
    ["str", STRING],
  ],
};

const COMPILED = Object.fromEntries(
  Object.entries(RULES).map(([lang, rules]) => [
    lang,
    { classes: rules.map(([cls]) => cls), regex: new RegExp(rules.map(([, p]) => `(${p})`).join("|"), "gi") },
  ]),
);
// Keywords and identifiers are case-sensitive in JavaScript; only tag names are not.
COMPILED.js.regex = new RegExp(COMPILED.js.regex.source, "g");
COMPILED.json.regex = new RegExp(COMPILED.json.regex.source, "g");

const EXTENSIONS = {
  js: "js", jsx: "js", mjs: "js", cjs: "js", ts: "js", tsx: "js",
  json: "json", css: "css", scss: "css", html: "html", htm: "html", svg: "html", vue: "html",
};

/** The highlighter language for a file path, or null for plain text. */
export function languageOf(path) {
  const ext = path.includes(".") ? path.split(".").pop().toLowerCase() : "";
  return EXTENSIONS[ext] || null;
}

/** Escape text for use inside HTML. */
export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** `code` as highlighted HTML for `lang` (plain escaped text when lang is unknown). */
export function highlight(code, lang) {
  const spec = lang && COMPILED[lang];
  if (!spec) return escapeHtml(code);
  const out = [];
  let last = 0;
  spec.regex.lastIndex = 0;
  for (const match of code.matchAll(spec.regex)) {
    if (!match[0]) continue;
    const group = match.findIndex((value, i) => i > 0 && value !== undefined);
    out.push(escapeHtml(code.slice(last, match.index)));
    out.push(`<span class="tok-${spec.classes[group - 1]}">${escapeHtml(match[0])}</span>`);
    last = match.index + match[0].length;
  }
  out.push(escapeHtml(code.slice(last)));
  return out.join("");
}
