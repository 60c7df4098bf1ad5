"""The attribute names our spans carry: the OpenTelemetry GenAI semantic conventions
(semantic conventions 1.37 and later, checked against the 1.44 schema in
``opentelemetry-semantic-conventions`` 0.66b2), written out here so the package needs only
``opentelemetry-api``; and ours, under ``dbos_agents.``."""

from __future__ import annotations

from typing import Final

OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"

INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"

# Ours: what the conventions have no name for.
RUN_SEQ: Final = "dbos_agents.run_seq"
RUN_STATUS: Final = "dbos_agents.run.status"
TURN: Final = "dbos_agents.turn"
RESUMED: Final = "dbos_agents.execution.resumed"
TOOL_KIND: Final = "dbos_agents.tool.kind"
TOOL_OUTCOME: Final = "dbos_agents.tool.outcome"
"""``ok``, ``error``, ``unknown_outcome`` or ``timed_out``."""
WAIT_KIND: Final = "dbos_agents.wait.kind"
WAIT_END: Final = "dbos_agents.wait.end"
"""``answered``, ``deadline`` or ``interrupted``."""
COST_USD: Final = "dbos_agents.usage.cost_usd"
STEP_NAME: Final = "dbos_agents.step.name"
