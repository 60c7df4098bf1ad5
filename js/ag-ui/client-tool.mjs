// A frontend tool: the run ends with the agent's call of `confirm`; the script runs it (the
// "browser" says yes), adds the tool message and runs the thread again. One line per run.
import { TOOLS as tools, answerConfirm, makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const agent = makeAgent(s);
agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
const first = await runOnce(agent, { tools });
print(first);
const answered = answerConfirm(agent);
if (answered) {
  const second = await runOnce(agent, { tools });
  print({ ...second, answered: answered.call.id, args: answered.args });
  if (s.again) {
    // The same thread posted again with nothing new: the answer is not submitted twice.
    print(await runOnce(agent, { tools }));
  }
}
