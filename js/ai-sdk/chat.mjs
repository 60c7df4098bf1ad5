// What useChat runs, without React: the `ai` package's AbstractChat over a plain state
// object, and DefaultChatTransport (tapped to record the parts it parses).
import { AbstractChat, DefaultChatTransport } from 'ai';

class PlainState {
  constructor(messages = []) {
    this.status = 'ready';
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage = (m) => {
    this.messages = this.messages.concat(m);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (x) => structuredClone(x);
}

export class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new PlainState(messages) });
  }
}

/** DefaultChatTransport that keeps every part it parsed (for the test's assertions). */
export class TappedTransport extends DefaultChatTransport {
  constructor(options) {
    super(options);
    this.chunks = [];
  }
  processResponseStream(stream) {
    return super.processResponseStream(stream).pipeThrough(
      new TransformStream({
        transform: (chunk, controller) => {
          this.chunks.push(chunk);
          controller.enqueue(chunk);
        },
      }),
    );
  }
}

export function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

export function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join('');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Until `done()` holds and the chat is idle (ready or error), or `timeoutMs` passes. */
export async function until(chat, done, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (done() && (chat.status === 'ready' || chat.status === 'error')) return true;
    await sleep(20);
  }
  return false;
}

/** A session token, as the page keeps it: from the `data-session` part, sent back as
 * `Authorization: Bearer`. */
export class TokenBox {
  constructor(token) {
    this.token = token;
  }
  headers = () => (this.token ? { Authorization: `Bearer ${this.token}` } : {});
  onData = (part) => {
    if (part.type === 'data-session') this.token = part.data.token;
  };
}
