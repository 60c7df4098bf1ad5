// An agent that asks mid-run (a durable tool's asks, a sub-agent's waits): the first run
// ends with an approval interrupt (resumed, approved), the second with a frontend tool
// `confirm` to run (the script runs it and adds the tool message), the third with the
// agent's answer. One line per run.
// argv[2]: {url, agent, threadId, message, timeoutMs?}; past timeoutMs (default 45000) the
// script says on stderr which run hung and what it had seen, and exits 1.
import { buildResumeArray } from "@ag-ui/client";
import { TOOLS as tools, answerConfirm, makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const timeoutMs = s.timeoutMs ?? 45000;
const agent = makeAgent(s);
let stage = "the first run (expecting an approval interrupt)";
let seen = [];
agent.subscribe({
  onEvent({ event }) {
    seen.push(event.type === "TOOL_CALL_START" ? `TOOL_CALL_START(${event.toolCallName} ${event.toolCallId})` : event.type);
  },
});
setTimeout(() => {
  process.stderr.write(
    `ag-ui/asks.mjs: timed out after ${timeoutMs} ms in ${stage} (agent ${s.agent}, thread ` +
      `${s.threadId}); its events so far: ${seen.filter((t) => !t.startsWith("TEXT_MESSAGE_CONTENT")).join(" ") || "none"}\n`,
  );
  process.exit(1);
}, timeoutMs).unref();

agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
const first = await runOnce(agent, { tools });
print(first);
const interrupts = agent.pendingInterrupts ?? [];
const responses = Object.fromEntries(
  interrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
);
stage = "the second run (resumed, approved; expecting the frontend tool confirm)";
seen = [];
const second = await runOnce(agent, { tools, resume: buildResumeArray(interrupts, responses) });
print(second);
const answered = answerConfirm(agent);
if (answered) {
  stage = "the third run (confirm answered; expecting the answer)";
  seen = [];
  print({ ...(await runOnce(agent, { tools })), answered: answered.call.id, args: answered.args });
}
process.exit(0);
