"""Test a plugin through the real protocol, without dsh.

PluginHarness plays dsh's part: it describes and configures the plugin,
then calls its tools, sends it events and reads its decisions, over gRPC
exactly as dsh would. It works with plain unittest (Debian's python3 may
lack pytest) and with pytest alike:

    from dsh_plugin.testing import PluginHarness
    import my_plugin

    class MyPluginTest(unittest.TestCase):
        def test_refuses_passwords(self):
            with PluginHarness(my_plugin.plugin, config={"word": "password"}) as h:
                self.assertEqual(h.admit("my password is 42").kind, "reject")
                self.assertEqual(h.call_tool("word_count", {"text": "a b"}).content, "2")

PluginHarness(plugin) serves a Plugin object in this process (fast; a
debugger's breakpoints work). PluginHarness.child(argv) starts the plugin
as dsh does — the handshake, AutoMTLS, its own process — so it tests what
dsh will run, an installed console script included.
"""

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from concurrent import futures

import grpc

from .events import NOTIFICATIONS, WATERFALLS
from .errors import PluginError
from .handshake import COOKIE_KEY, COOKIE_VALUE, PROTOCOL_VERSION, ServerCert
from .proto import events_pb2 as events
from .proto import plugin_pb2 as pb

_SERVICE = "/dsh.plugin.v1.Plugin/"
_ADMISSION = "agent-controller/admission"
_STATUS = {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}


class PluginHarness:
    """dsh's side of the protocol, for tests. Close it (or use with)."""

    def __init__(self, plugin=None, config=None, entry_id="test", capabilities=("tools", "emit-batch"),
                 timeout=10, _channel=None, _proc=None):
        self.timeout = timeout
        self._server = None
        self._proc = _proc
        if _channel is None:
            if plugin is None:
                raise ValueError("give a Plugin to serve in this process, or use PluginHarness.child(argv)")
            self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=plugin.workers.limit + 8))
            self._server.add_generic_rpc_handlers(plugin.rpc_handlers())
            port = self._server.add_insecure_port("127.0.0.1:0")
            self._server.start()
            _channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        self.channel = _channel
        try:
            self.description = self._unary("Describe", pb.DescribeRequest, pb.DescribeResponse)(
                pb.DescribeRequest(protocol_version=PROTOCOL_VERSION, capabilities=list(capabilities)), timeout=timeout)
            res = self._unary("Configure", pb.ConfigureRequest, pb.ConfigureResponse)(
                pb.ConfigureRequest(config_json=json.dumps(config or {}).encode(), entry_id=entry_id), timeout=timeout)
        except BaseException:
            self.close()
            raise
        if res.HasField("error"):
            self.close()
            raise PluginError.from_proto(res.error)

    @classmethod
    def child(cls, argv, config=None, env=None, **kwargs):
        """Start argv as dsh starts a plugin binary and connect to it.

        env adds to this process's environment. The plugin's stderr (its
        log) passes through to the test's, and so does what it prints on
        stdout after the handshake, marked, as dsh would log it.
        """
        client = ServerCert()  # the host's AutoMTLS certificate
        full = dict(os.environ, PLUGIN_PROTOCOL_VERSIONS=str(PROTOCOL_VERSION),
                    PLUGIN_CLIENT_CERT=client.cert_pem.decode(), **{COOKIE_KEY: COOKIE_VALUE})
        full.pop("DSH_HOST_FD", None)
        full.update(env or {})
        proc = subprocess.Popen(list(argv), env=full, stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            line = proc.stdout.readline().strip()
            fields = line.split("|")
            if len(fields) != 6 or fields[4] != "grpc":
                raise RuntimeError("%s did not answer the handshake (stdout began %r, exit %s); a plugin calls "
                                   "plugin.serve() and prints nothing to stdout before it" % (argv[0], line, proc.poll()))
            from cryptography import x509
            from cryptography.hazmat.primitives import serialization
            der = base64.b64decode(fields[5] + "=" * (-len(fields[5]) % 4))
            server_pem = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=client.key_pem,
                                                 certificate_chain=client.cert_pem)
            channel = grpc.secure_channel(fields[3], creds, options=(("grpc.ssl_target_name_override", "localhost"),))
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            raise
        # Read stdout to its end, or a plugin that prints a lot blocks on a
        # full pipe.
        drain = threading.Thread(target=_forward, args=(proc.stdout,), daemon=True)
        drain.start()
        proc.drain = drain
        return cls(config=config, _channel=channel, _proc=proc, **kwargs)

    def _unary(self, name, req, resp):
        return self.channel.unary_unary(_SERVICE + name, request_serializer=req.SerializeToString,
                                        response_deserializer=resp.FromString)

    # What a test asks.

    def tools(self):
        """The names of the tools the plugin declared."""
        return [t.name for t in self.description.tools]

    def call_tool(self, name, args=None, workspace="", agent_id="main", call_id="call-1", unattended=False):
        """Run one tool call; returns the events.ToolResult (is_error,
        content, parts). A protocol error (PluginError) is raised."""
        out = self._unary("ExecuteTool", pb.ToolInvocation, pb.ToolOutcome)(pb.ToolInvocation(
            agent_id=agent_id, workspace=workspace, unattended=unattended,
            call=events.ToolCall(id=call_id, name=name, arguments=json.dumps(args or {}))), timeout=self.timeout)
        if out.HasField("error"):
            raise PluginError.from_proto(out.error)
        return out.result

    def call(self, event, payload, on_next=None, scope="main"):
        """Run one waterfall call: payload is the event's message (as
        events.Admission for admission). on_next(payload) answers the
        plugin's next() with an events.Result, playing the rest of dsh's
        chain; without it, next() gets an empty result. Returns the
        plugin's events.Result."""
        if event not in WATERFALLS:
            raise ValueError("%r is not a waterfall this SDK knows (%s)" % (event, ", ".join(sorted(WATERFALLS))))
        field = WATERFALLS[event][0]
        q = queue.Queue()
        q.put(pb.HostMessage(start=pb.CallStart(event=event, scope_tag=scope,
                                                payload=events.Payload(**{field: payload}))))
        replies = self._stream()(iter(q.get, None), timeout=self.timeout)
        try:
            msg = last = next(replies)
            if msg.HasField("next"):
                given = msg.next.payload if msg.next.HasField("payload") else events.Payload(**{field: payload})
                answer = on_next(getattr(given, field)) if on_next else events.Result()
                q.put(pb.HostMessage(next_result=pb.NextResult(result=answer)))
                last = next(replies)
            if last.result.HasField("error"):
                raise PluginError.from_proto(last.result.error)
            return last.result.result
        finally:
            q.put(None)
            replies.cancel()

    def admit(self, content, agent_id="main", mode="followup", decision="admit"):
        """Send one message through the plugin's admission; returns its
        events.Decision (kind: admit, reject, ...). When the plugin passes
        the message on, the rest of the chain answers with decision."""
        payload = events.Admission(agent_id=agent_id, mode=mode, message=events.Message(role="user", content=content))
        res = self.call(_ADMISSION, payload,
                        on_next=lambda p: events.Result(decision=events.Decision(kind=decision)), scope=agent_id)
        return res.decision

    def emit(self, event, payload):
        """Send one notification; a listener's failure is raised."""
        field = NOTIFICATIONS.get(event)
        if field is None:
            raise ValueError("%r is not a notification this SDK knows (%s)" % (event, ", ".join(sorted(NOTIFICATIONS))))
        out = self._unary("Emit", pb.EmitRequest, pb.EmitResponse)(
            pb.EmitRequest(event=event, payload=events.Payload(**{field: payload})), timeout=self.timeout)
        if out.HasField("error"):
            raise PluginError.from_proto(out.error)

    def health(self):
        """The plugin's answer to dsh's health check: SERVING or NOT_SERVING."""
        raw = self.channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=self.timeout)
        return _STATUS.get(raw, repr(raw))

    def _stream(self):
        return self.channel.stream_stream(_SERVICE + "Call", request_serializer=pb.HostMessage.SerializeToString,
                                          response_deserializer=pb.PluginMessage.FromString)

    def close(self):
        """Stop the plugin (gracefully, as dsh does, then by force)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                self.channel.unary_unary("/plugin.GRPCController/Shutdown")(b"", timeout=2)
                self._proc.wait(timeout=2)
            except (grpc.RpcError, subprocess.TimeoutExpired):
                pass
            if self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        if self._proc is not None:
            self._proc.drain.join(timeout=2)
        self.channel.close()
        if self._server is not None:
            self._server.stop(0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _forward(stdout):
    with stdout:
        for line in stdout:
            sys.stderr.write("[plugin stdout] " + line)
