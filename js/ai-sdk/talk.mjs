// One conversation through useChat's machinery. argv[2] is JSON:
//   {url, agent, chatId, text, token?, toolOutput?, approve?, responses?, messages?, reason?}
// toolOutput: the page's `confirm` tool answers it (onToolCall + addToolOutput);
// approve: true/false answers approval requests (addToolApprovalResponse);
// responses: how many responses to wait for (automatic sends included);
// messages: the chat's initial messages (then `text` may be omitted: sendMessage()).
// Prints {event: "done", status, error, messages, chunks, token, finishes}.
import {
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { Chat, TappedTransport, TokenBox, out, until } from './chat.mjs';

const cfg = JSON.parse(process.argv[2]);
const box = new TokenBox(cfg.token);
const transport = new TappedTransport({ api: `${cfg.url}/ai-sdk/${cfg.agent}`, headers: box.headers });
const errors = [];
let finishes = 0;
let chat;
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
    if (toolCall.toolName === 'confirm' && cfg.toolOutput !== undefined) {
      // Not awaited, as the AI SDK asks (it would deadlock the stream's processing).
      chat.addToolOutput({ tool: 'confirm', toolCallId: toolCall.toolCallId, output: cfg.toolOutput });
    }
  },
  sendAutomaticallyWhen: ({ messages }) =>
    lastAssistantMessageIsCompleteWithToolCalls({ messages }) ||
    lastAssistantMessageIsCompleteWithApprovalResponses({ messages }),
});

let answered = false;
const approvals = async () => {
  if (cfg.approve === undefined || answered) return;
  const last = chat.lastMessage;
  const part = last?.parts.find((p) => p.state === 'approval-requested');
  if (part) {
    answered = true;
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: cfg.approve, reason: cfg.reason });
  }
};

if (cfg.text !== undefined) await chat.sendMessage({ text: cfg.text });
else await chat.sendMessage();
const want = cfg.responses ?? 1;
await until(chat, () => {
  void approvals();
  return finishes >= want || chat.status === 'error';
});
await until(chat, () => true, 1000);
out({
  event: 'done',
  status: chat.status,
  error: chat.error?.message ?? null,
  errors,
  messages: chat.messages,
  chunks: transport.chunks,
  token: box.token ?? null,
  finishes,
});
