// The service's HTTP API (docs/service-contract.md), as small promise-returning functions.
// Every failure becomes an ApiError whose `message` is fit to show a person; the raw detail
// stays in `detail` for the console.

import { describeApiError } from "./errors.js";

export class ApiError extends Error {
  constructor(status, code, message, detail = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

// A GET that failed at the network level is tried again this many times (a blip: on a Docker
// host, creating a sandbox's network makes Chromium drop the requests in flight). Other methods
// are not repeated: the server may have acted on them.
const GET_RETRIES_MS = [300, 1000];

async function send(path, options) {
  const delays = options.method === "GET" ? GET_RETRIES_MS : [];
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await fetch(path, options);
    } catch (exc) {
      if (attempt >= delays.length) throw new ApiError(0, "network", describeApiError(0, "network"), String(exc));
      await new Promise((resolve) => setTimeout(resolve, delays[attempt]));
    }
  }
}

async function request(method, path, body) {
  const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await send(path, options);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null; // a proxy's HTML error page, say: never shown as is
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    const code = error.code || `http_${response.status}`;
    throw new ApiError(response.status, code, describeApiError(response.status, code, error.message), data);
  }
  return data;
}

const enc = encodeURIComponent;

/** The signed-in user, the providers with a stored key, the default choice and the demos. */
export const me = () => request("GET", "/api/me");

/** Store an API key for `provider` (encrypted on the server, never returned). */
export const putKey = (provider, key) => request("PUT", `/api/me/keys/${enc(provider)}`, { key });

/** Forget the stored API key for `provider`. */
export const deleteKey = (provider) => request("DELETE", `/api/me/keys/${enc(provider)}`);

/** End this browser's session (its cookie is cleared). */
export const logout = () => request("POST", "/api/logout");

/** End every browser session of the user, this one too: `{revoked}`. */
export const revokeSessions = () => request("POST", "/api/me/sessions/revoke");

/** The user's chats, newest first. */
export const listChats = async () => (await request("GET", "/api/chats")).chats;

/** A new chat holding its first message (`{content, provider, model}`); resolves to
 * `{chat, run_id, message_id}`. A refused message creates no chat. */
export const startChat = (title, message) =>
  request("POST", "/api/chats", { ...(title ? { title } : {}), message });

/** Give a chat a new title; resolves to the chat. */
export const renameChat = async (chatId, title) =>
  (await request("PATCH", `/api/chats/${enc(chatId)}`, { title })).chat;

/** Delete a chat with its app, files, versions and history (409 while a run is in progress). */
export const deleteChat = (chatId) => request("DELETE", `/api/chats/${enc(chatId)}`);

/** `{chat, messages, runs}` of one chat. */
export const getChat = (chatId) => request("GET", `/api/chats/${enc(chatId)}`);

/** Send a message; resolves to `{run_id, message_id}`. */
export const sendMessage = (chatId, body) =>
  request("POST", `/api/chats/${enc(chatId)}/messages`, body);

/** One run's status, stop reason, sandbox and preview URL. */
export const getRun = (runId) => request("GET", `/api/runs/${enc(runId)}`);

/** Ask a run to stop. */
export const cancelRun = (runId) => request("POST", `/api/runs/${enc(runId)}/cancel`);

/** The files of a sandbox's workspace: `[{path, size}]`. */
export const listFiles = async (sandboxId) =>
  (await request("GET", `/api/sandboxes/${enc(sandboxId)}/files`)).files;

/** One workspace file's text. */
export async function readFile(sandboxId, path) {
  const url = `/api/sandboxes/${enc(sandboxId)}/files/${path.split("/").map(enc).join("/")}`;
  const response = await send(url, { method: "GET", credentials: "same-origin" });
  if (!response.ok) {
    throw new ApiError(response.status, "file", describeApiError(response.status, "file"));
  }
  return response.text();
}

/** A one-time link that signs the browser in on the sandbox's preview host. */
export const previewLogin = async (sandboxId) =>
  (await request("POST", `/api/sandboxes/${enc(sandboxId)}/preview-login`)).url;

/** Whether the sandbox's preview is ready: `{state: "ready"|"starting"|"failing", code, message}`
 * (a sandbox that is gone is an ApiError with status 404). */
export const previewState = (sandboxId) => request("GET", `/api/sandboxes/${enc(sandboxId)}/preview`);

const envPath = (chatId) => `/api/chats/${enc(chatId)}/env`;

/** A chat's app variables: names, kinds, public flags; values of plain variables only. */
export const listEnv = (chatId) => request("GET", envPath(chatId));

/** Store a variable or secret; `{variable, dev_server}` ("restarting" or "not_running"). */
export const putEnvVariable = (chatId, name, value, secret) =>
  request("PUT", `${envPath(chatId)}/${enc(name)}`, { value, secret });

/** Forget a variable; `{dev_server}`. */
export const deleteEnvVariable = (chatId, name) => request("DELETE", `${envPath(chatId)}/${enc(name)}`);

const versionsPath = (chatId) => `/api/chats/${enc(chatId)}/versions`;

/** A chat's project versions, newest first. */
export const listVersions = async (chatId) => (await request("GET", versionsPath(chatId))).versions;

/** What version `version` of a chat changed: `{files: [{path, status, diff}]}`. */
export const versionDiff = (chatId, version) =>
  request("GET", `${versionsPath(chatId)}/${enc(version)}/diff`);

/** Record version `version` again as the newest and write it into the chat's sandbox:
 * `{restored, version}`. */
export const restoreVersion = (chatId, version) =>
  request("POST", `${versionsPath(chatId)}/${enc(version)}/restore`);

/** Edit an element's text in place (no model turn): `{version, file, sandbox_id}`. */
export const postTextEdit = (chatId, edit) => request("POST", `/api/chats/${enc(chatId)}/text-edits`, edit);

/** The URL of a version's zip (`latest` works as the version). */
export const archiveUrl = (chatId, version) => `${versionsPath(chatId)}/${enc(version)}/archive`;

/** Start publishing version `version` at the chat's public link, in the background: `{job}`
 * (`{id, version, stage, active, code, message}`; 409 while one runs, 429 past the hour's limit). */
export const publishVersion = async (chatId, version) =>
  (await request("POST", `${versionsPath(chatId)}/${enc(version)}/publish`)).job;

/** The chat's newest publish job, or null. */
export const getPublishJob = async (chatId) =>
  (await request("GET", `/api/chats/${enc(chatId)}/publish-job`)).job;

/** The SSE URL of the chat's newest publish job (`publish_job` events until it ended). */
export const publishJobEventsUrl = (chatId) => `/api/chats/${enc(chatId)}/publish-job/events`;

const publicationPath = (chatId) => `/api/chats/${enc(chatId)}/publication`;

/** The chat's public link (`{slug, url, published, version}`), or null if never published. */
export const getPublication = async (chatId) => (await request("GET", publicationPath(chatId))).publication;

/** Take the chat's public link down (it answers "not found" from then on): `{publication}`. */
export const unpublish = (chatId) => request("DELETE", publicationPath(chatId));

/** The SSE URL of a run's events after sequence number `after`. */
export const eventsUrl = (runId, after) => `/api/runs/${enc(runId)}/events?after=${after}`;

/** The SSE URL of a sandbox's preview errors, after stream id `after` (when there is one). */
export const previewErrorsUrl = (sandboxId, after) =>
  `/api/sandboxes/${enc(sandboxId)}/preview-errors${after ? `?after=${enc(after)}` : ""}`;

const remotePath = (chatId) => `/api/chats/${enc(chatId)}/remote`;

/** A chat's git remote: `{url, branch, has_token, last_push}` or null (the token never comes back). */
export const getRemote = async (chatId) => (await request("GET", remotePath(chatId))).remote;

/** Set a chat's git remote; `token` undefined keeps the stored one (same URL), "" removes it. */
export const setRemote = async (chatId, url, branch, token) =>
  (await request("PUT", remotePath(chatId), token === undefined ? { url, branch } : { url, branch, token })).remote;

/** Push every version (one commit each) as a fast-forward: `{push, remote}`. */
export const pushProject = (chatId) => request("POST", `/api/chats/${enc(chatId)}/push`);

/** A new chat from a git repository: `{chat, version, template, left_out, sandbox_id, preview}`. */
export const importChat = (body) => request("POST", "/api/chats/import", body);
