// The example chat page (served at /chat/{agent} by `dbos-agents serve` with
// DBOS_AGENTS_SERVER_CHAT_PAGE=true): the AI SDK's own chat class and transport over
// POST /ai-sdk/{agent}, in plain DOM. Bundled with esbuild (`npm run build-chat-page` in js/)
// into dbos_agents/server/chat_page/static/chat.js, so the page loads nothing from a CDN.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";

const root = document.getElementById("chat");
const agent = root.dataset.agent;
const log = root.querySelector("#messages");
const statusLine = root.querySelector("#status");
const form = root.querySelector("#composer");
const input = form.querySelector("input");
const chatKey = `dbos-agents-chat:${agent}`;
const chatId = localStorage.getItem(chatKey) ?? crypto.randomUUID();
localStorage.setItem(chatKey, chatId);
const tokenKey = `dbos-agents-token:${agent}:${chatId}`;

// A new chat's answer carries its session token; later requests send it back.
async function fetchKeepingToken(url, init) {
  const response = await fetch(url, init);
  const token = response.headers.get("x-dbos-agents-token");
  if (token) localStorage.setItem(tokenKey, token);
  return response;
}

function authHeaders() {
  const token = localStorage.getItem(tokenKey);
  return token ? { Authorization: `Bearer ${token}` } : {};
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
}

// Client tools this page runs in the browser, by name: each returns the tool's output.
const clientTools = {
  confirm: (input) => ask(input.question),
};

const startedKey = `dbos-agents-started:${agent}:${chatId}`;
let chat;
chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `/ai-sdk/${encodeURIComponent(agent)}`,
    headers: authHeaders,
    fetch: fetchKeepingToken,
  }),
  sendAutomaticallyWhen: (options) =>
    lastAssistantMessageIsCompleteWithToolCalls(options) ||
    lastAssistantMessageIsCompleteWithApprovalResponses(options),
  onToolCall: async ({ toolCall }) => {
    const run = clientTools[toolCall.toolName];
    if (!run) {
      chat.addToolOutput({
        state: "output-error",
        tool: toolCall.toolName,
        toolCallId: toolCall.toolCallId,
        errorText: `this page cannot run ${toolCall.toolName}`,
      });
      return;
    }
    const output = await run(toolCall.input);
    chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output });
  },
  onError: () => render(),
});

// --- rendering --------------------------------------------------------------------------


function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

function toolName(part) {
  return part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
}

function renderTool(part) {
  const box = el("div", { class: "tool", "data-state": part.state, "data-tool": toolName(part) });
  box.append(el("div", { class: "tool-name" }, `${toolName(part)} ${JSON.stringify(part.input ?? {})}`));
  if (part.state === "approval-requested") {
    const decide = (approved) => () =>
      chat.addToolApprovalResponse({ id: part.approval.id, approved });
    box.append(
      el("button", { class: "approve", onclick: decide(true) }, "Approve"),
      el("button", { class: "deny", onclick: decide(false) }, "Deny"),
    );
  } else if (part.state === "output-available") {
    box.append(el("div", { class: "tool-output" }, JSON.stringify(part.output)));
  } else if (part.state === "output-error" || part.state === "output-denied") {
    box.append(el("div", { class: "tool-error" }, part.errorText ?? "denied"));
  }
  return box;
}

// A running tool's note (``ctx.progress``): one line per note, replaced when sent again.
function renderProgress(data) {
  const done = typeof data.fraction === "number" ? ` (${Math.round(data.fraction * 100)}%)` : "";
  return el("div", { class: "progress", "data-tool": data.tool }, `${data.tool}: ${data.note}${done}`);
}

function render() {
  if (chat === undefined) return;
  log.replaceChildren(
    ...chat.domState.messages.map((m) => {
      const box = el("div", { class: `message ${m.role}`, "data-id": m.id });
      for (const part of m.parts) {
        if (part.type === "text") box.append(el("span", { class: "text" }, part.text));
        else if (part.type === "dynamic-tool" || part.type.startsWith("tool-")) box.append(renderTool(part));
        else if (part.type === "data-progress") box.append(renderProgress(part.data));
      }
      return box;
    }),
  );
  statusLine.textContent = chat.domState.error ? `error: ${chat.domState.error.message}` : chat.status;
  statusLine.dataset.status = chat.status;
  log.scrollTop = log.scrollHeight;
}

// A client tool's dialog: resolves with the tool's output when the user answers.
function ask(question) {
  return new Promise((resolve) => {
    const dialog = root.querySelector("#ask");
    dialog.querySelector(".question").textContent = question;
    const answer = (ok) => () => {
      dialog.close();
      resolve({ ok, note: ok ? "confirmed in the browser" : "refused in the browser" });
    };
    dialog.querySelector(".yes").onclick = answer(true);
    dialog.querySelector(".no").onclick = answer(false);
    dialog.showModal();
  });
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  localStorage.setItem(startedKey, "1");
  chat.sendMessage({ text });
});
root.querySelector("#new-chat").addEventListener("click", () => {
  localStorage.removeItem(chatKey);
  location.reload();
});

window.dbosChat = chat;
render();
// A reload picks up a run that is still going, from the durable log.
if (localStorage.getItem(startedKey) !== null) chat.resumeStream();
