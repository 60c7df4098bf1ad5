// An approval: the run ends with an interrupt for `close_account`; the script answers it
// with AG-UI's resume (buildResumeArray) and `approved` (default true). One line per run.
import { buildResumeArray, isInterruptExpired } from "@ag-ui/client";
import { makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const agent = makeAgent(s);
agent.addMessage({ id: crypto.randomUUID(), role: "user", content: s.message });
const first = await runOnce(agent);
print(first);
const interrupts = agent.pendingInterrupts ?? [];
if (interrupts.length) {
  const expired = interrupts.some((i) => isInterruptExpired(i));
  const approved = s.approved ?? true;
  const responses = Object.fromEntries(
    interrupts.map((i) => [i.id, { status: "resolved", payload: { approved, reason: "looks fine" } }]),
  );
  const resume = buildResumeArray(interrupts, responses);
  print({ ...(await runOnce(agent, { resume })), expired, resume });
}
