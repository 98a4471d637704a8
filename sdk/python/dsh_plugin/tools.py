"""What a tool handler gets and may return."""

import json
import re
import threading

from .proto import events_pb2 as events

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
APPROVALS = ("", "allow", "ask", "deny")


class ToolError(Exception):
    """A failure the model should see and can act on.

    Raised from a tool handler it becomes a result with is_error set and
    the exception's text as content, not a protocol error: the turn goes
    on and the model reads why.
    """


class ToolContext:
    """One call of a tool: who made it, where, and whether it was aborted.

    cancelled is a threading.Event set when the host cancels the call (the
    model's abort, the agent's dispose) or the call ends; a long handler
    checks is_cancelled() or waits on the event and returns early.
    """

    def __init__(self, invocation, log):
        self.agent_id = invocation.agent_id
        self.call_id = invocation.call.id
        self.tool = invocation.call.name
        self.workspace = invocation.workspace
        self.unattended = invocation.unattended
        self.cancelled = threading.Event()
        self.log = log

    def is_cancelled(self):
        """Whether the host cancelled the call."""
        return self.cancelled.is_set()


def text(s):
    """A text content part."""
    return events.ContentPart(text=s)


def image(media_type, data):
    """An image content part: image/png, image/jpeg, image/gif or image/webp."""
    return events.ContentPart(image=events.Image(media_type=media_type, data=data))


def empty():
    """A deliberately empty, successful result.

    A handler that returns None instead fails the call with
    PLUGIN_EMPTY_RESULT: a missing return statement is far more common
    than a tool with nothing to say.
    """
    return events.ToolResult()


def to_result(value):
    """The ToolResult of what a handler returned.

    A str is the content; a ToolResult passes as it is; a list of content
    parts (text(), image()) is the parts; anything else is sent as JSON.
    None is not a result: the caller turns it into PLUGIN_EMPTY_RESULT.
    """
    if isinstance(value, events.ToolResult):
        return value
    if isinstance(value, str):
        return events.ToolResult(content=value)
    if isinstance(value, (list, tuple)) and all(isinstance(p, events.ContentPart) for p in value):
        return events.ToolResult(parts=list(value))
    return events.ToolResult(content=json.dumps(value))


def schema_text(parameters):
    """The parameters schema as JSON text, checked to be a JSON object."""
    if parameters is None or parameters == "":
        return ""
    if isinstance(parameters, str):
        parsed = json.loads(parameters)
    else:
        parsed = parameters
    if not isinstance(parsed, dict):
        raise ValueError("a tool's parameters must be a JSON Schema object, got %r" % (parsed,))
    return json.dumps(parsed, separators=(",", ":"), sort_keys=True)
