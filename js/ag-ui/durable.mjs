// A durable tool that asks mid-call: the first run ends with an approval interrupt (the
// script resumes it, approved), the second with a frontend tool `confirm` the tool asked for
// (the script runs it and adds the tool message), the third with the agent's answer.
// One line per run.
import { buildResumeArray } from "@ag-ui/client";
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
const interrupts = agent.pendingInterrupts ?? [];
const responses = Object.fromEntries(
  interrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
);
const second = await runOnce(agent, { tools, resume: buildResumeArray(interrupts, responses) });
print(second);
const calls = agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
const call = calls.find((c) => c.function.name === "confirm");
if (call) {
  const args = JSON.parse(call.function.arguments);
  agent.addMessage({
    id: crypto.randomUUID(),
    role: "tool",
    toolCallId: call.id,
    content: JSON.stringify({ ok: true, note: `confirmed: ${args.question}` }),
  });
  print({ ...(await runOnce(agent, { tools })), answered: call.id, args });
}
