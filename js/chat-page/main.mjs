// The example chat page (served at /chat/{agent} by `dbos-agents serve` with
// DBOS_AGENTS_SERVER_CHAT_PAGE=true): the AI SDK's own chat class and transport over
// POST /ai-sdk/{agent}, in plain DOM. Bundled with esbuild (`npm run build-chat-page` in js/)
// into dbos_agents/server/chat_page/static/chat.js, so the page loads nothing from a CDN.
//
// Any client tool is answered with a form made from the answer's JSON schema (the module the
// inbox uses); a refused request shows the server's message where the user acted; a reload
// shows the whole conversation from the session, then resumes the active run's stream; a
// lost connection is retried until the stream resumes.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { schemaFields, yesNoKey } from "../../dbos_agents/server/inbox/static/schema-form.mjs";

const root = document.getElementById("chat");
const agent = root.dataset.agent;
const log = root.querySelector("#messages");
const statusLine = root.querySelector("#status");
const connection = root.querySelector("#connection");
const form = root.querySelector("#composer");
const input = form.querySelector("input");
const composerError = root.querySelector("#composer-error");
const chatKey = `dbos-agents-chat:${agent}`;
const chatId = localStorage.getItem(chatKey) ?? crypto.randomUUID();
localStorage.setItem(chatKey, chatId);
const tokenKey = `dbos-agents-token:${agent}:${chatId}`;
const base = `/ai-sdk/${encodeURIComponent(agent)}`;
const pageBase = `/chat/${encodeURIComponent(agent)}/${encodeURIComponent(chatId)}`;

/** A request the server answered with an error: its message, status and code. */
class Refused extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function refusal(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    return new Refused(body.message ?? text, response.status, body.error);
  } catch {
    return new Refused(text || `HTTP ${response.status}`, response.status, undefined);
  }
}

// A new chat's answer carries its session token; later requests send it back. An error
// answer becomes a `Refused` with the server's own message.
async function fetchKeepingToken(url, init) {
  const response = await fetch(url, init);
  const token = response.headers.get("x-dbos-agents-token");
  if (token) localStorage.setItem(tokenKey, token);
  if (!response.ok) throw await refusal(response);
  return response;
}

function authHeaders() {
  const token = localStorage.getItem(tokenKey);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function getJson(path) {
  const response = await fetchKeepingToken(path, { headers: authHeaders() });
  return response.json();
}

// What the chat holds, re-rendered on every change (what useChat's React state does).
class DomState {
  #status = "ready";
  error = undefined;
  messages = [];
  get status() { return this.#status; }
  set status(value) { this.#status = value; render(); }
  pushMessage = (m) => { this.messages = [...this.messages, m]; render(); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); render(); };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
    render();
  };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    const state = new DomState();
    super({ ...init, state });
    this.domState = state;
  }
  setMessages(messages) {
    this.messages = messages;
    render();
  }
}

// --- where the user acted, and what the server said about it ------------------------------

let acted = null; // {kind: "answer" | "approval" | "message", id, text}
const problems = new Map(); // tool call or approval id -> the server's message
const asks = new Map(); // waiting client tool call id -> its form (kept across renders)

const isTool = (p) => p.type === "dynamic-tool" || p.type.startsWith("tool-");

// Put a refused answer back in front of the user: the approval's buttons, the tool's form.
function reopen(id) {
  const again = (p) => {
    if (!isTool(p)) return p;
    if (p.state === "approval-responded" && p.approval?.id === id)
      return { ...p, state: "approval-requested", approval: { id } };
    if (p.toolCallId === id && (p.state === "output-available" || p.state === "output-error") && asks.has(id))
      return { ...p, state: "input-available", output: undefined, errorText: undefined };
    return p;
  };
  chat.setMessages(chat.messages.map((m) => ({ ...m, parts: m.parts.map(again) })));
}

function approvalHint(err) {
  if (err.status !== 403) return "";
  if (/TOKENS_MAY_APPROVE/.test(err.message ?? "")) return "The call still waits."; // the server says how
  return (
    "Approving needs an approver: sign in through the server's authenticate hook, or start" +
    " the server with DBOS_AGENTS_SERVER_TOKENS_MAY_APPROVE=true to let the chat's own token" +
    " approve. The call still waits."
  );
}

function isDisconnect(err) {
  return err instanceof TypeError || /network|fetch|terminated|load failed/i.test(err.message ?? "");
}

function onError(err) {
  if (!(err instanceof Refused) && isDisconnect(err)) {
    reconnect();
    return;
  }
  const here = acted;
  const streamed = !(err instanceof Refused);
  if (here && here.kind !== "message" && (!streamed || err.message.includes(here.id))) {
    problems.set(here.id, { message: err.message, hint: here.kind === "approval" ? approvalHint(err) : "" });
    acted = null;
    setTimeout(() => { reopen(here.id); chat.clearError(); }, 0);
    return;
  }
  if (here?.kind === "message") {
    // Nothing the user typed is lost: the unsent message goes back to the composer.
    acted = null;
    setTimeout(() => {
      const last = chat.messages.at(-1);
      if (last?.role === "user" && last.id === here.id) chat.setMessages(chat.messages.slice(0, -1));
      if (!input.value) input.value = here.text;
      chat.clearError();
    }, 0);
  }
  composerError.textContent = err.message;
  composerError.hidden = false;
  render();
}

// --- a lost connection: say so, then resume -------------------------------------------------

let reconnecting = false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function reconnect() {
  if (reconnecting) return;
  reconnecting = true;
  connection.hidden = false;
  connection.textContent = "Connection lost; reconnecting…";
  for (let attempt = 0; ; attempt++) {
    await sleep(Math.min(500 * 2 ** attempt, 8000));
    try {
      const active = await restore();
      reconnecting = false;
      connection.hidden = true;
      chat.clearError();
      if (active) chat.resumeStream();
      return;
    } catch (err) {
      if (err instanceof Refused) {
        reconnecting = false;
        connection.textContent = `Cannot reconnect: ${err.message}`;
        return;
      }
      connection.textContent = `Connection lost; reconnecting (attempt ${attempt + 2})…`;
    }
  }
}

// The whole conversation from the session; whether a run is active (to resume its stream).
async function restore() {
  const { messages, active } = await getJson(`${pageBase}/history`);
  if (messages.length || chat.messages.length === 0) chat.setMessages(messages);
  return active;
}

// --- client tools: a form from the answer's schema ------------------------------------------

async function schemaOf(toolCallId) {
  for (let attempt = 0; attempt < 40; attempt++) {
    const { pending } = await getJson(`${pageBase}/pending`);
    const row = pending.find((r) => r.toolCallId === toolCallId);
    if (row) return row.outputSchema ?? {};
    await sleep(250);
  }
  return {};
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

function answer(tool, toolCallId, output) {
  problems.delete(toolCallId);
  acted = { kind: "answer", id: toolCallId };
  chat.addToolOutput({ tool, toolCallId, output });
}

function askForm(tool, toolCallId, input, schema) {
  const question = typeof input?.question === "string" ? input.question : null;
  const box = el("form", { class: "ask", "data-tool": tool, novalidate: "" });
  if (question) box.append(el("p", { class: "question" }, question));
  const key = yesNoKey(schema);
  if (key !== null) {
    const send = (value) => () => answer(tool, toolCallId, { [key]: value });
    box.append(
      el("button", { type: "button", class: "yes", onclick: send(true) }, "Yes"),
      el("button", { type: "button", class: "no", onclick: send(false) }, "No"),
    );
    return box;
  }
  const fields = schemaFields(schema);
  const note = el("p", { class: "form-error", role: "alert" });
  box.append(fields.element, note, el("button", { type: "submit", class: "submit" }, "Send answer"));
  fields.element.addEventListener("input", () => { note.textContent = ""; });
  box.addEventListener("submit", (event) => {
    event.preventDefault();
    const got = fields.read();
    note.textContent = got.error ?? "";
    if (!got.error) answer(tool, toolCallId, got.value);
  });
  setTimeout(() => fields.focus(), 0);
  return box;
}

async function onToolCall({ toolCall }) {
  const { toolName, toolCallId } = toolCall;
  if (asks.has(toolCallId)) return;
  asks.set(toolCallId, el("p", { class: "loading" }, `${toolName}: loading its form…`));
  render();
  let schema = {};
  try {
    schema = await schemaOf(toolCallId);
  } catch (err) {
    problems.set(toolCallId, { message: err.message, hint: "" });
  }
  asks.set(toolCallId, askForm(toolName, toolCallId, toolCall.input, schema));
  render();
}

// --- the chat -------------------------------------------------------------------------------

let chat;
chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({ api: base, headers: authHeaders, fetch: fetchKeepingToken }),
  sendAutomaticallyWhen: (options) =>
    lastAssistantMessageIsCompleteWithToolCalls(options) ||
    lastAssistantMessageIsCompleteWithApprovalResponses(options),
  onToolCall: (options) => { onToolCall(options); },
  onError,
  onFinish: ({ isAbort, isError, finishReason }) => {
    if (!isAbort && !isError) acted = null;
    // A stream that ended without its finish part was cut (a server restart): resume.
    if (!isAbort && !isError && finishReason === undefined) reconnect();
  },
});

// --- rendering ------------------------------------------------------------------------------

function toolName(part) {
  return part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
}

// A value shown in full when short; folded to one line, opened on a click, when long.
function value(v, cls) {
  const text = typeof v === "string" ? v : JSON.stringify(v);
  if (text === undefined) return el("span", { class: cls }, "");
  if (text.length <= 120) return el("code", { class: cls }, text);
  const full = typeof v === "string" ? v : JSON.stringify(v, null, 2);
  return el("details", { class: `fold ${cls}` }, el("summary", {}, `${text.slice(0, 80)}…`), el("pre", {}, full));
}

function approvalButtons(part) {
  const reason = el("input", { class: "reason", placeholder: "Reason (optional)", "aria-label": "reason" });
  const decide = (approved) => () => {
    problems.delete(part.approval.id);
    acted = { kind: "approval", id: part.approval.id };
    const why = reason.value.trim() || undefined;
    chat.addToolApprovalResponse({ id: part.approval.id, approved, reason: why });
  };
  return el(
    "div",
    { class: "decide" },
    reason,
    el("button", { type: "button", class: "approve", onclick: decide(true) }, "Approve"),
    el("button", { type: "button", class: "deny", onclick: decide(false) }, "Deny"),
  );
}

function renderTool(part) {
  const name = toolName(part);
  const box = el("div", { class: "tool", "data-state": part.state, "data-tool": name, "data-call": part.toolCallId });
  box.append(el("div", { class: "tool-name" }, el("strong", {}, name), " ", value(part.input ?? {}, "tool-input")));
  if (part.state === "approval-requested") box.append(approvalButtons(part));
  else if (part.state === "input-available" && !part.providerExecuted && asks.has(part.toolCallId))
    box.append(asks.get(part.toolCallId));
  else if (part.state === "output-available") box.append(value(part.output, "tool-output"));
  else if (part.state === "output-error") box.append(el("div", { class: "tool-error" }, part.errorText ?? "failed"));
  else if (part.state === "output-denied") box.append(el("div", { class: "tool-error" }, "denied"));
  const problem = problems.get(part.approval?.id) ?? problems.get(part.toolCallId);
  if (problem && (part.state === "approval-requested" || part.state === "input-available"))
    box.append(el("div", { class: "refused", role: "alert" }, el("p", { class: "what" }, problem.message),
      ...(problem.hint ? [el("p", { class: "hint" }, problem.hint)] : [])));
  return box;
}

// A running tool's note (``ctx.progress``): one line per note, replaced when sent again.
function renderProgress(data) {
  const done = typeof data.fraction === "number" ? ` (${Math.round(data.fraction * 100)}%)` : "";
  return el("div", { class: "progress", "data-tool": data.tool }, `${data.tool}: ${data.note}${done}`);
}

function render() {
  if (chat === undefined) return;
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.replaceChildren(
    ...chat.domState.messages.map((m) => {
      const box = el("div", { class: `message ${m.role}`, "data-id": m.id });
      for (const part of m.parts) {
        if (part.type === "text") box.append(el("span", { class: "text" }, part.text));
        else if (isTool(part)) box.append(renderTool(part));
        else if (part.type === "data-progress") box.append(renderProgress(part.data));
      }
      return box;
    }),
  );
  statusLine.textContent = chat.status;
  statusLine.dataset.status = chat.status;
  if (atEnd) log.scrollTop = log.scrollHeight;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  composerError.hidden = true;
  const id = crypto.randomUUID();
  acted = { kind: "message", id, text };
  chat.sendMessage({ id, role: "user", parts: [{ type: "text", text }] });
});
root.querySelector("#new-chat").addEventListener("click", () => {
  localStorage.removeItem(chatKey);
  location.reload();
});

window.dbosChat = chat;
render();
// A reload shows the conversation from the session, then picks up a run still going.
restore().then(
  (active) => { if (active) chat.resumeStream(); },
  (err) => (err instanceof Refused ? onError(err) : reconnect()),
);
