"""The statements the exporter writes calls, model calls and agent runs with (every value a bound parameter).

The roll-up's own statements are in :mod:`otel_repeat_guard.store.rollup`.
"""

INSERT_CALL = """
INSERT OR IGNORE INTO tool_calls (
    start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id,
    agent_key, agent_name, agent_known, agent_pending, tool_name, tracked, arguments_digest,
    error, run_length, reminder_tier, reminder_threshold, unguarded_reason, reminder_variant
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_ARGUMENTS = "INSERT INTO tool_call_arguments (call_id, preview) VALUES (?, ?)"
INSERT_DETECTION = """
INSERT INTO detections (
    call_id, kind, end_ns, run_length, period, repetitions, cycle_tools, outcome_digest,
    reminder_tier, reminder_threshold
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_MODEL_CALL = """
INSERT OR IGNORE INTO model_calls (
    start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id,
    agent_key, agent_name, agent_known, agent_pending, model, provider,
    input_tokens, output_tokens, total_tokens, conversation_id, error, cache_read_tokens, cache_write_tokens,
    reasoning_tokens
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_OUTPUT = "INSERT INTO model_call_outputs (call_id, preview) VALUES (?, ?)"
INSERT_UNDELIVERED = """
INSERT OR IGNORE INTO undelivered_reminders (model_call_id, reminder_span_id, tool_name, tier, reason)
VALUES (?, ?, ?, ?, ?)
"""
# Model calls made directly under an agent-run span take its key and name, as tool calls do.
RESOLVE_PENDING_MODELS = """
UPDATE model_calls
SET agent_key = CASE WHEN agent_known THEN agent_key ELSE :key END,
    agent_name = COALESCE(agent_name, :name),
    agent_known = 1,
    agent_pending = 0
WHERE trace_id = :trace_id AND parent_span_id = :span_id AND agent_pending = 1
"""
# An agent label no call carries any more (a run key its run span has since named) leaves the filter list.
DROP_UNUSED_AGENT = """
DELETE FROM dimensions WHERE kind = 'agent' AND value = ?
  AND NOT EXISTS (SELECT 1 FROM call_rollup WHERE agent = ?)
"""
INSERT_RUN = "INSERT OR REPLACE INTO agent_runs (trace_id, span_id, agent_key, agent_name) VALUES (?, ?, ?, ?)"
# Calls made directly under an agent-run span take its key (if theirs was provisional) and name.
RESOLVE_PENDING = """
UPDATE tool_calls
SET agent_key = CASE WHEN agent_known THEN agent_key ELSE :key END,
    agent_name = COALESCE(agent_name, :name),
    agent_known = 1,
    agent_pending = 0
WHERE trace_id = :trace_id AND parent_span_id = :span_id AND agent_pending = 1
"""
INSERT_DIMENSION = "INSERT OR IGNORE INTO dimensions (kind, value) VALUES (?, ?)"
# The pending calls a run span is about to resolve, as the roll-up sees them.
PENDING_UNDER = """
SELECT end_ns, service_name, agent_key, agent_name, agent_known, tool_name, tracked, run_length,
       reminder_tier, duration_ns
FROM tool_calls WHERE trace_id = ? AND parent_span_id = ? AND agent_pending = 1
"""
MODEL_FIGURES = (
    "id, end_ns, service_name, agent_key, agent_name, agent_known, agent_pending, model, provider,"
    " input_tokens, output_tokens, total_tokens, wasted_tool, cache_read_tokens, cache_write_tokens,"
    " reasoning_tokens"
)
# A repeated call's issuer: the latest model call under the same parent span that started before it ended ...
ISSUER_BY_PARENT = f"""
SELECT {MODEL_FIGURES} FROM model_calls
WHERE trace_id = ? AND parent_span_id = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1
"""
# ... else the latest model call of its agent run (tool spans nested below the run's model calls' parent).
ISSUER_BY_AGENT = f"""
SELECT {MODEL_FIGURES} FROM model_calls
WHERE agent_key = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1
"""
ISSUER_BY_ID = f"SELECT {MODEL_FIGURES} FROM model_calls WHERE trace_id = ? AND span_id = ?"
PENDING_MODELS_UNDER = f"""
SELECT {MODEL_FIGURES} FROM model_calls WHERE trace_id = ? AND parent_span_id = ? AND agent_pending = 1
"""
