// A streamed answer: one user message on a new thread (then, with `followUp`, a second one
// on the same thread, sent with the session token the first run delivered).
// Prints one JSON line per run.
import { makeAgent, print, runOnce, spec } from "./lib.mjs";

const s = spec();
const agent = makeAgent(s);
for (const text of [s.message, ...(s.followUp ? [s.followUp] : [])]) {
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
  print(await runOnce(agent));
}
