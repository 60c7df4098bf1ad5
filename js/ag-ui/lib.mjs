// Shared by the AG-UI scripts: an official HttpAgent on POST /ag-ui/{agent}, and one run
// summarized as a JSON-able record (the events' types, the text streamed, the outcome).
import { HttpAgent } from "@ag-ui/client";

export const TOKEN_EVENT = "dbos-agents.session-token";

/** The script's one argument: a JSON object. */
export function spec() {
  return JSON.parse(process.argv[2] ?? "{}");
}

export function print(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

export function makeAgent({ url, agent, threadId, token, messages }) {
  return new HttpAgent({
    url: `${url}/ag-ui/${agent}`,
    threadId,
    initialMessages: messages ?? [],
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
}

/** The frontend tool the scripts declare: the page's confirm dialog. */
export const TOOLS = [
  {
    name: "confirm",
    description: "Ask the user to confirm.",
    parameters: { type: "object", properties: { question: { type: "string" } } },
  },
];

/**
 * Run the agent's pending call of `confirm` as the page would (it says yes): its tool
 * message is added to the thread. Returns {call, args}, or null when there is none.
 */
export function answerConfirm(agent) {
  const calls = agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
  const call = calls.find((c) => c.function.name === "confirm");
  if (!call) return null;
  const args = JSON.parse(call.function.arguments);
  agent.addMessage({
    id: crypto.randomUUID(),
    role: "tool",
    toolCallId: call.id,
    content: JSON.stringify({ ok: true, note: `confirmed: ${args.question}` }),
  });
  return { call, args };
}

/** The last assistant message's text. */
export function lastText(agent) {
  const replies = agent.messages.filter((m) => m.role === "assistant" && m.content);
  return replies.length ? replies[replies.length - 1].content : null;
}

/**
 * Run once. ``stopAfter``: abort after that many TEXT_MESSAGE_CONTENT events (a client that
 * goes away mid-answer). A session token in a CUSTOM event is put on the agent's headers.
 */
export async function runOnce(agent, params = {}, { stopAfter } = {}) {
  const events = [];
  const contents = [];
  let token = null;
  let finished = null;
  let runError = null;
  let aborted = false;
  const subscriber = {
    onEvent({ event }) {
      events.push(event.type);
      if (event.type === "TEXT_MESSAGE_CONTENT") {
        contents.push(event.delta);
        if (stopAfter !== undefined && contents.length >= stopAfter && !aborted) {
          aborted = true;
          agent.abortRun();
        }
      }
      if (event.type === "CUSTOM" && event.name === TOKEN_EVENT) {
        token = event.value.token;
        agent.headers = { ...agent.headers, Authorization: `Bearer ${token}` };
      }
      if (event.type === "RUN_ERROR") runError = { message: event.message, code: event.code };
    },
    onRunFinishedEvent(params) {
      finished = {
        outcome: params.outcome,
        interrupts: params.interrupts ?? null,
        pendingToolCallIds: params.pendingToolCallIds ?? null,
      };
    },
  };
  let error = null;
  try {
    await agent.runAgent(params, subscriber);
  } catch (e) {
    if (!aborted) error = { message: String(e?.message ?? e), status: e?.status ?? null, payload: e?.payload ?? null };
  }
  return {
    events,
    contents,
    streamed: contents.join(""),
    token,
    finished,
    runError,
    error,
    aborted,
    text: lastText(agent),
    messages: agent.messages,
    pendingInterrupts: agent.pendingInterrupts ?? [],
  };
}
