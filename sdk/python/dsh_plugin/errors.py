"""Errors that cross the plugin boundary by code, like dsh's own errs."""

import json

from .proto import plugin_pb2 as pb

#: The code the host gives an error that carries none (sdk.PluginError).
PLUGIN_ERROR = "PLUGIN_ERROR"
#: A handler raised something other than a PluginError.
HANDLER_FAILED = "PLUGIN_HANDLER_FAILED"
#: The host sent an event, or a tool call, this plugin has no handler for.
NO_HANDLER = "PLUGIN_NO_HANDLER"
#: A tool handler returned None; tools.empty() is the deliberate empty result.
EMPTY_RESULT = "PLUGIN_EMPTY_RESULT"


class PluginError(Exception):
    """An error the host recognizes by code and reason.

    Raise it from any handler: it travels as a protocol Error, so the host
    matches its code exactly as it would one of its own. An error that
    `next` raised is a PluginError too, carrying the host's code, and
    re-raising it passes it on unchanged.
    """

    def __init__(self, code, message, reason="", details=None, cause=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.details = details or {}
        self.cause = cause

    def __str__(self):
        text = "%s: %s" % (self.code, self.message) if self.code else self.message
        if self.cause is not None:
            text += ": %s" % self.cause
        return text

    def to_proto(self):
        """The wire form, cause included."""
        out = pb.Error(code=self.code, reason=self.reason, message=self.message)
        if self.details:
            out.details_json = json.dumps(self.details).encode()
        if isinstance(self.cause, PluginError):
            out.cause.CopyFrom(self.cause.to_proto())
        return out

    @classmethod
    def from_proto(cls, e):
        """The PluginError of a wire Error (as the host sent it)."""
        details = json.loads(e.details_json) if e.details_json else None
        cause = cls.from_proto(e.cause) if e.HasField("cause") else None
        return cls(e.code, e.message, reason=e.reason, details=details, cause=cause)


def error_to_proto(exc, where):
    """The wire Error for any exception a handler raised.

    A PluginError keeps its code; anything else becomes
    PLUGIN_HANDLER_FAILED naming the handler (where) and the exception, so
    a bug in a handler is an error the host reports, never a dead plugin.
    """
    if isinstance(exc, PluginError):
        return exc.to_proto()
    return pb.Error(code=HANDLER_FAILED, reason="handler-raised",
                    message="%s raised %s: %s (fix the plugin's handler; its stderr has the traceback)"
                    % (where, type(exc).__name__, exc))
