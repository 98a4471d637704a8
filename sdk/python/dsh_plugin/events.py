"""Which field of Payload and Result each event uses (see EVENTS.md)."""

#: Waterfall events: event -> (Payload field, Result field).
WATERFALLS = {
    "agent-controller/admission": ("admission", "decision"),
    "tools/execute": ("tool_execution", "tool_result"),
    "tools/approve": ("approval", "verdict"),
    "agent/request": ("request", "request"),
    "agent/step-result": ("step_result", "step_result"),
    "agent/turn-continuation": ("continuation", "continue_turn"),
}

#: Notifications: event -> Payload field.
NOTIFICATIONS = {
    "agent/inbox/inserted": "inbox_inserted",
    "agent/status": "status",
    "agent/stream-chunk": "stream_chunk",
    "session/event": "session_event",
    "session/outcome": "session_outcome",
    "approval/requested": "approval_requested",
    "approval/answered": "approval_answered",
}

ADMISSION = "agent-controller/admission"
APPROVAL = "tools/approve"


def payload_value(payload, field=None):
    """The message a Payload carries: its field for the event, or whichever is set."""
    if field is None:
        field = payload.WhichOneof("event")
        if field is None:
            return None
    return getattr(payload, field) if payload.HasField(field) else None
