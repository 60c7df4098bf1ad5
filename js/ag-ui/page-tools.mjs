// A page that declares its own frontend tool (`pick_color`, which the agent does not define)
// and shares state with the agent, driven by the official HttpAgent. One line per run: every
// event as the client received it, and the client's messages and state after the run.
// `{"messages": [...], "state": {...}}`: the thread and state as the page held them.
// `{"answer": "<color>"}`: run the pending `pick_color` call first (the page picks).
// `{"tools": [...]}`: the tools to declare instead of `pick_color`.
import { makeAgent, print, spec, TOKEN_EVENT } from "./lib.mjs";

export const PICK_COLOR = {
  name: "pick_color",
  description: "Let the user pick a color in the page.",
  parameters: {
    type: "object",
    properties: { prompt: { type: "string" } },
    required: ["prompt"],
  },
};

const s = spec();
const agent = makeAgent(s);
agent.setState(s.state ?? {});
if (s.message) agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
let answered = null;
if (s.answer) {
  const calls = agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
  const done = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  const call = calls.find((c) => c.function.name === "pick_color" && !done.has(c.id));
  if (call) {
    agent.addMessage({
      id: crypto.randomUUID(),
      role: "tool",
      toolCallId: call.id,
      content: JSON.stringify({ color: s.answer }),
    });
    answered = call.id;
  }
}
const events = [];
let token = null;
let error = null;
try {
  await agent.runAgent(
    {
      tools: s.tools ?? [PICK_COLOR],
      context: s.context ?? [],
      forwardedProps: s.forwardedProps ?? {},
    },
    {
      onEvent({ event }) {
        events.push(event);
        if (event.type === "CUSTOM" && event.name === TOKEN_EVENT) {
          token = event.value.token;
          agent.headers = { ...agent.headers, Authorization: `Bearer ${token}` };
        }
      },
    },
  );
} catch (e) {
  error = { message: String(e?.message ?? e), status: e?.status ?? null };
}
print({ events, token, error, answered, messages: agent.messages, state: agent.state });
