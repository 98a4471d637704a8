"""dsh_plugin: write dsh plugin binaries in Python.

The SDK does the go-plugin handshake with AutoMTLS, serves the health and
controller services, logs to the host, dies with the host, and turns
decorated functions into the dsh plugin protocol (sdk/proto/pluginv1):

    from dsh_plugin import Plugin, events

    plugin = Plugin("word-count", "1.0.0")

    @plugin.tool("word_count", "Count the words of a text.",
                 parameters={"type": "object", "properties": {"text": {"type": "string"}},
                             "required": ["text"]})
    def word_count(args, ctx):
        return str(len(args["text"].split()))

    plugin.serve()

events and pb are the generated classes of events.proto and plugin.proto.
"""

from .errors import EMPTY_RESULT, HANDLER_FAILED, NO_HANDLER, PLUGIN_ERROR, PluginError
from .handshake import HandshakeError
from .plugin import Plugin
from .proto import events_pb2 as events
from .proto import plugin_pb2 as pb
from .tools import ToolContext, ToolError, empty, image, text

__all__ = ["Plugin", "PluginError", "ToolError", "ToolContext", "HandshakeError", "events", "pb",
           "text", "image", "empty", "PLUGIN_ERROR", "HANDLER_FAILED", "NO_HANDLER", "EMPTY_RESULT"]
__version__ = "0.1.0"
