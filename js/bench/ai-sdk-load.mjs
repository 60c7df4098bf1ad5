// bench/chat_ui.py's client: N concurrent chats through what useChat runs (the `ai`
// package's AbstractChat and DefaultChatTransport) against `dbos-agents serve`.
// argv[2] is JSON: {url, chats, pieces, rounds?, spreadMs?, timeoutMs?, prefix?}
//
// Phase 1: N chats with the agent `stamp` (its model streams `<i>:<unix time>;` pieces,
// stamped as they leave the adapter). Phase 2, once every phase-1 chat is done: N chats
// with `asker`, whose first turn calls the client tool `confirm`; onToolCall answers it
// (addToolOutput, not awaited), sendAutomaticallyWhen posts it, and the second turn streams
// stamped pieces. Each chat starts at a random moment within `spreadMs` of its phase.
// `rounds` times both phases, one after the other.
//
// Times are the host's clock in ms with sub-ms digits (performance.timeOrigin +
// performance.now(), against the worker's time.time()). A text-delta "arrives" when the
// transport has parsed it (a tap on processResponseStream, before AbstractChat applies it).
// Prints one JSON line per chat (both phases), then {event: "done"}.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { Chat, TokenBox, sleep, textOf } from '../ai-sdk/chat.mjs';

const cfg = JSON.parse(process.argv[2]);
const N = cfg.chats;
const ROUNDS = cfg.rounds ?? 1;
const PIECES = cfg.pieces;
const SPREAD = cfg.spreadMs ?? 0;
const TIMEOUT = cfg.timeoutMs ?? 120000;
const PREFIX = cfg.prefix ?? `bench-${process.pid}-${Date.now()}`;

const now = () => performance.timeOrigin + performance.now();
const LOOP_MS = 1;

/** DefaultChatTransport that notes when each POST leaves, when its headers arrive, and
 * every text-delta's arrival with its text. */
class TimedTransport extends DefaultChatTransport {
  constructor(options) {
    const posts = [];
    super({
      ...options,
      fetch: async (input, init) => {
        const rec = { postedAt: now(), headersAt: null, deltas: [] };
        posts.push(rec);
        const r = await fetch(input, init);
        rec.headersAt = now();
        return r;
      },
    });
    this.posts = posts;
  }
  processResponseStream(stream) {
    const rec = this.posts[this.posts.length - 1];
    return super.processResponseStream(stream).pipeThrough(
      new TransformStream({
        transform: (chunk, controller) => {
          if (chunk.type === 'text-delta') rec.deltas.push([now(), chunk.delta]);
          controller.enqueue(chunk);
        },
      }),
    );
  }
}

/** The pieces `<i>:<stamp>;` of a text: their stamps, and whether they are 0..PIECES-1
 * once each, in order, and nothing else. */
function parse(text) {
  const parts = text.split(';');
  const tail = parts.pop();
  const stamps = [];
  let ok = tail === '' && parts.length === PIECES;
  parts.forEach((p, k) => {
    const [i, stamp] = p.split(':');
    if (Number(i) !== k || !(Number(stamp) > 0)) ok = false;
    stamps.push(Number(stamp) * 1000);
  });
  return { ok, stamps };
}

/** Latency (ms) of every piece in `deltas` ([arrival, text] pairs): arrival - stamp. */
function pieceLatencies(deltas) {
  const out = [];
  for (const [at, text] of deltas) {
    for (const p of text.split(';')) {
      if (p) out.push(at - Number(p.split(':')[1]) * 1000);
    }
  }
  return out;
}

function until(chat, done) {
  const deadline = Date.now() + TIMEOUT;
  return (async () => {
    while (Date.now() < deadline) {
      if (done() && (chat.status === 'ready' || chat.status === 'error')) return true;
      await sleep(20);
    }
    return false;
  })();
}

function open(agent, id, extra = {}) {
  const box = new TokenBox();
  const errors = [];
  const transport = new TimedTransport({ api: `${cfg.url}/ai-sdk/${agent}`, headers: box.headers });
  const chat = new Chat({
    id,
    transport,
    onData: box.onData,
    onError: (e) => errors.push(e.message),
    ...extra,
  });
  return { chat, transport, errors };
}

async function stampChat(i) {
  await sleep(Math.random() * SPREAD);
  const { chat, transport, errors } = open('stamp', `${PREFIX}-stamp-${i.round}-${i.chat}`);
  await chat.sendMessage({ text: `chat ${i.chat}` });
  const settled = await until(chat, () => transport.posts.length >= 1);
  const text = textOf(chat.lastMessage?.role === 'assistant' ? chat.lastMessage : undefined);
  const { ok, stamps } = parse(text);
  const rec = transport.posts[0];
  const first = rec?.deltas[0];
  return {
    stamp_ok: ok && settled && chat.status === 'ready',
    stamp_status: settled ? chat.status : 'timeout',
    stamp_errors: errors,
    first_token_ms: first && stamps.length ? first[0] - stamps[0] : null,
    // The response's headers came after the first piece left the adapter: its first
    // token was read from the log, not announced live.
    opened_after_first_piece: first && stamps.length ? rec.headersAt > stamps[0] : null,
    // POST -> the response's headers: the server made the session and queued the run.
    stamp_headers_ms: rec?.headersAt ? rec.headersAt - rec.postedAt : null,
    piece_ms: rec ? pieceLatencies(rec.deltas) : [],
  };
}

async function askerChat(i) {
  await sleep(Math.random() * SPREAD);
  let shownAt = null;
  const answered = [];
  let chat;
  const opened = open('asker', `${PREFIX}-asker-${i.round}-${i.chat}`, {
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName !== 'confirm') return;
      shownAt = now();
      answered.push(toolCall.toolCallId);
      // Not awaited, as the AI SDK asks.
      chat.addToolOutput({ tool: 'confirm', toolCallId: toolCall.toolCallId, output: { ok: true } });
    },
    sendAutomaticallyWhen: ({ messages }) => lastAssistantMessageIsCompleteWithToolCalls({ messages }),
  });
  chat = opened.chat;
  const { transport, errors } = opened;
  await chat.sendMessage({ text: `chat ${i.chat}` });
  const settled = await until(chat, () => transport.posts.length >= 2);
  const text = textOf(chat.lastMessage?.role === 'assistant' ? chat.lastMessage : undefined);
  const { ok, stamps } = parse(text);
  const second = transport.posts[1];
  const first = second?.deltas[0];
  const measured = shownAt !== null && first && stamps.length;
  return {
    tool_ok: ok && settled && chat.status === 'ready' && answered.length === 1,
    tool_status: settled ? chat.status : 'timeout',
    tool_errors: errors,
    tool_calls_shown: answered.length,
    // onToolCall -> the first text-delta of the answer to the tool output.
    round_trip_ms: measured ? first[0] - shownAt : null,
    // ... split: onToolCall -> the transport's POST (the first stream ends first),
    round_trip_post_ms: measured ? second.postedAt - shownAt : null,
    // POST -> the second turn's first piece leaves the adapter (submit, resume, model),
    round_trip_resume_ms: measured ? stamps[0] - second.postedAt : null,
    //   of which POST -> the response's headers (the server's work before it streams),
    round_trip_headers_ms: measured ? second.headersAt - second.postedAt : null,
    // and that piece -> its arrival at the client.
    round_trip_deliver_ms: measured ? first[0] - stamps[0] : null,
  };
}

const loop = monitorEventLoopDelay({ resolution: LOOP_MS });
loop.enable();
const cpu0 = process.cpuUsage();
let stampS = 0;
let askerS = 0;
for (let round = 0; round < ROUNDS; round++) {
  const ids = [...Array(N).keys()].map((chat) => ({ round, chat }));
  const t0 = now();
  const stamped = await Promise.all(ids.map(stampChat));
  const t1 = now();
  const asked = await Promise.all(ids.map(askerChat));
  stampS += (t1 - t0) / 1000;
  askerS += (now() - t1) / 1000;
  for (const [k, id] of ids.entries()) {
    process.stdout.write(JSON.stringify({ ...id, ...stamped[k], ...asked[k] }) + '\n');
  }
}
loop.disable();
const cpu = process.cpuUsage(cpu0);
process.stdout.write(
  JSON.stringify({
    event: 'done',
    chats: N,
    rounds: ROUNDS,
    stamp_phase_s: stampS,
    asker_phase_s: askerS,
    clock_skew_ms: now() - Date.now(),
    // This process's CPU and how late its event loop ran (a timer every LOOP_MS, its
    // interval less LOOP_MS): a client that cannot keep up shows here, and its lateness is
    // in every arrival time.
    node_cpu_s: (cpu.user + cpu.system) / 1e6,
    loop_lag_p50_ms: Math.max(0, loop.percentile(50) / 1e6 - LOOP_MS),
    loop_lag_p99_ms: Math.max(0, loop.percentile(99) / 1e6 - LOOP_MS),
  }) + '\n',
);
