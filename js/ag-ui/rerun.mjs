// A client that loses its stream and runs the thread again.
// `{"stopAfter": n}`: a new thread, one message, abort after n TEXT_MESSAGE_CONTENT events.
// `{"messages": [...]}`: the thread as that client held it, run again with nothing new.
// `{"tool": {"toolCallId", "content"}}` (with messages): a tool result for that call id.
import { makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const agent = makeAgent(s);
if (s.stopAfter !== undefined) {
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
  print(await runOnce(agent, {}, { stopAfter: s.stopAfter }));
} else {
  if (s.tool) agent.addMessage({ id: crypto.randomUUID(), role: "tool", ...s.tool });
  const result = await runOnce(agent);
  const replies = agent.messages.filter((m) => m.role === "assistant" && m.content);
  print({ ...result, replies: replies.map((m) => m.content) });
}
