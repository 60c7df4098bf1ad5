// One conversation through useChat's machinery. argv[2] is JSON:
//   {url, agent, chatId, text, token?, toolOutput?, approve?, responses?, messages?, reason?,
//    timeoutMs?}
// toolOutput: the page's `confirm` tool answers every call of it (onToolCall + addToolOutput);
// approve: true/false answers every approval request, once each (addToolApprovalResponse),
// once the response that asked is over;
// responses: how many responses to wait for (automatic sends included);
// messages: the chat's initial messages (then `text` may be omitted: sendMessage());
// timeoutMs: past it the script says on stderr what it saw and exits 1 (default: no deadline
// of its own beyond the 30 s wait for the responses).
// Prints {event: "done", status, error, errors, messages, chunks, token, finishes,
//         toolCalls: [{toolName, toolCallId, input}], approvals: [{id, toolCallId, type}]}.
import {
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { Chat, TappedTransport, TokenBox, out, until } from './chat.mjs';

const cfg = JSON.parse(process.argv[2]);
const want = cfg.responses ?? 1;
const box = new TokenBox(cfg.token);
const transport = new TappedTransport({ api: `${cfg.url}/ai-sdk/${cfg.agent}`, headers: box.headers });
const errors = [];
const toolCalls = [];
const approvals = [];
let finishes = 0;
let chat;

const watchdog =
  cfg.timeoutMs === undefined
    ? undefined
    : setTimeout(() => {
        const seen = transport.chunks.map((c) =>
          c.type.startsWith('tool-')
            ? `${c.type}(${c.toolName ?? ''}${c.toolName ? ' ' : ''}${c.toolCallId ?? c.approvalId ?? ''})`
            : c.type,
        );
        process.stderr.write(
          `talk.mjs: timed out after ${cfg.timeoutMs} ms waiting for ${want} responses ` +
            `(agent ${cfg.agent}, chat ${cfg.chatId}): ${finishes} finished, chat status ` +
            `${chat?.status}, page ran ${JSON.stringify(toolCalls)}, approved ${JSON.stringify(approvals)}.\n` +
            `parts received: ${seen.filter((t) => t !== 'text-delta').join(' ')}\n`,
        );
        process.exit(1);
      }, cfg.timeoutMs);

chat = new Chat({
  id: cfg.chatId,
  messages: cfg.messages ?? [],
  transport,
  onData: box.onData,
  onError: (e) => errors.push(e.message),
  onFinish: () => {
    finishes += 1;
  },
  onToolCall: ({ toolCall }) => {
    toolCalls.push({ toolName: toolCall.toolName, toolCallId: toolCall.toolCallId, input: toolCall.input });
    if (toolCall.toolName === 'confirm' && cfg.toolOutput !== undefined) {
      // Not awaited, as the AI SDK asks (it would deadlock the stream's processing).
      chat.addToolOutput({ tool: 'confirm', toolCallId: toolCall.toolCallId, output: cfg.toolOutput });
    }
  },
  sendAutomaticallyWhen: ({ messages }) =>
    lastAssistantMessageIsCompleteWithToolCalls({ messages }) ||
    lastAssistantMessageIsCompleteWithApprovalResponses({ messages }),
});

const answered = new Set();
const approve = async () => {
  if (cfg.approve === undefined || chat.status !== 'ready') return;
  const part = chat.lastMessage?.parts.find(
    (p) => p.state === 'approval-requested' && !answered.has(p.approval.id),
  );
  if (part) {
    answered.add(part.approval.id);
    approvals.push({ id: part.approval.id, toolCallId: part.toolCallId, type: part.type });
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: cfg.approve, reason: cfg.reason });
  }
};

if (cfg.text !== undefined) await chat.sendMessage({ text: cfg.text });
else await chat.sendMessage();
await until(
  chat,
  () => {
    void approve();
    return finishes >= want || chat.status === 'error';
  },
  cfg.timeoutMs === undefined ? undefined : cfg.timeoutMs + 1000,
);
await until(chat, () => true, 1000);
clearTimeout(watchdog);
out({
  event: 'done',
  status: chat.status,
  error: chat.error?.message ?? null,
  errors,
  messages: chat.messages,
  chunks: transport.chunks,
  token: box.token ?? null,
  finishes,
  toolCalls,
  approvals,
});
