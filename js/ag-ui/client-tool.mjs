// A frontend tool: the run ends with the agent's call of `confirm`; the script runs it (the
// "browser" says yes), adds the tool message and runs the thread again. One line per run.
import { makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const agent = makeAgent(s);
const tools = [
  {
    name: "confirm",
    description: "Ask the user to confirm.",
    parameters: { type: "object", properties: { question: { type: "string" } } },
  },
];
agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
const first = await runOnce(agent, { tools });
print(first);
const calls = agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
const call = calls.find((c) => c.function.name === "confirm");
if (call) {
  const args = JSON.parse(call.function.arguments);
  const result = { ok: true, note: `confirmed: ${args.question}` };
  agent.addMessage({
    id: crypto.randomUUID(),
    role: "tool",
    toolCallId: call.id,
    content: JSON.stringify(result),
  });
  const second = await runOnce(agent, { tools });
  print({ ...second, answered: call.id, args });
  if (s.again) {
    // The same thread posted again with nothing new: the answer is not submitted twice.
    print(await runOnce(agent, { tools }));
  }
}
