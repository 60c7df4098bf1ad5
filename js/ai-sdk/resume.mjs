// A page that loses its stream mid-answer and resumes it (useChat({resume: true}) on a
// reload calls the same resumeStream). argv[2] is JSON: {url, agent, chatId, text, afterChars}.
// Prints {event: "partial"} once the answer has afterChars characters, then waits for a
// line on stdin (the test kills the worker meanwhile), stops the request, prints
// {event: "stopped"}, starts a new Chat with the messages it had (the partial answer
// included), prints {event: "resuming"}, resumes, and prints {event: "done", ...}.
import { createInterface } from 'node:readline';
import { Chat, TappedTransport, TokenBox, out, textOf, until } from './chat.mjs';

const cfg = JSON.parse(process.argv[2]);
const api = `${cfg.url}/ai-sdk/${cfg.agent}`;
const box = new TokenBox(cfg.token);
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();

const first = new TappedTransport({ api, headers: box.headers });
const chat1 = new Chat({ id: cfg.chatId, transport: first, onData: box.onData });
const sent = chat1.sendMessage({ text: cfg.text }).catch(() => {});
const assistant = (chat) => chat.messages.find((m) => m.role === 'assistant');
const deadline = Date.now() + 30000;
while (textOf(assistant(chat1)).length < cfg.afterChars && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 10));
}
out({ event: 'partial', text: textOf(assistant(chat1)) });
await lines.next();
rl.close();
process.stdin.destroy();
await chat1.stop();
await sent;
const kept = structuredClone(chat1.messages);
out({ event: 'stopped', text: textOf(assistant(chat1)), messages: kept });

const second = new TappedTransport({ api, headers: box.headers });
const errors = [];
const chat2 = new Chat({
  id: cfg.chatId,
  messages: kept,
  transport: second,
  onData: box.onData,
  onError: (e) => errors.push(e.message),
});
out({ event: 'resuming' });
await chat2.resumeStream();
await until(chat2, () => true);
out({
  event: 'done',
  status: chat2.status,
  error: chat2.error?.message ?? null,
  errors,
  messages: chat2.messages,
  chunks: second.chunks,
});
