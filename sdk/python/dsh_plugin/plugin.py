"""The Plugin: decorators for handlers, and the gRPC services the host calls."""

import json
import logging
import os
import queue
import sys
import threading
from concurrent import futures

import grpc

from . import errors as _errors
from . import events as _events
from .errors import PluginError, error_to_proto
from .handshake import HandshakeError, ServerCert, check_environment, handshake_line
from .hostwatch import watch_host
from .log import HostLogHandler, host_logger
from .proto import events_pb2 as events
from .proto import plugin_pb2 as pb
from .tools import APPROVALS, TOOL_NAME, ToolContext, ToolError, schema_text, to_result
from .workers import Workers, concurrency_from

SERVICE = "dsh.plugin.v1.Plugin"
#: Features this SDK understands (DescribeResponse.accepts).
ACCEPTS = ("emit-batch",)
_SERVING = b"\x08\x01"  # grpc.health.v1.HealthCheckResponse{status: SERVING}
_NOT_SERVING = b"\x08\x02"
#: gRPC threads beyond the handlers' slots, so the health check, Describe
#: and the refusals of a full plugin are answered while every slot is held.
_RESERVE = 8


class _Tool:
    def __init__(self, decl, fn):
        self.decl, self.fn = decl, fn


class Plugin:
    """A dsh plugin binary written in Python.

    Declare handlers with the decorators, then call serve():

        plugin = Plugin("no-secrets", "1.0.0")

        @plugin.admission
        def admission(payload, next):
            ...

        plugin.serve()

    host_capabilities holds what the host offered in Describe;
    entry_id the config entry's id, known once Configure ran.

    concurrency is how many handlers (waterfall calls, tool calls,
    notifications) run at once; a call beyond it is refused at once with
    gRPC status RESOURCE_EXHAUSTED, which dsh reports as PLUGIN_BUSY. Unset,
    it is $DSH_PLUGIN_CONCURRENCY (an entry's env: can set it), else 32.
    """

    def __init__(self, name, version="0.0.0", requires=(), concurrency=None):
        self.name, self.version = name, version
        self.requires = list(requires)
        self._concurrency = concurrency
        self._workers = None
        self.log = host_logger(name)
        self.host_capabilities = []
        self.entry_id = ""
        self._listeners = []
        self._waterfalls = {}
        self._notifications = {}
        self._tools = {}
        self._configure = None

    # Decorators.

    def configure(self, fn):
        """Receive the entry's config (a dict) before any event.

        Raising fails the plugin's start in the host with that error.
        """
        self._configure = fn
        return fn

    def waterfall(self, event, prepend=False):
        """Listen to a waterfall event: fn(payload, next) -> result.

        payload is the event's typed message (events_pb2), next(payload=None)
        runs the rest of the chain (with a replacement payload if given) and
        returns its result or raises its PluginError. Returning None passes
        on what next returned, calling it first if the handler did not.
        """
        if event not in _events.WATERFALLS:
            raise ValueError("%r is not a waterfall this SDK knows (%s)" % (event, ", ".join(sorted(_events.WATERFALLS))))

        self._claim(event)

        def register(fn):
            self._listeners.append(pb.Listener(event=event, kind=pb.KIND_WATERFALL, prepend=prepend))
            self._waterfalls[event] = fn
            return fn
        return register

    def admission(self, fn=None, *, prepend=False):
        """An admission listener: fn(events_pb2.Admission, next) -> events_pb2.Decision."""
        register = self.waterfall(_events.ADMISSION, prepend=prepend)
        return register(fn) if fn is not None else register

    def approval(self, fn=None, *, prepend=False):
        """An approval policy: fn(events_pb2.Approval, next) -> events_pb2.Verdict.

        Decide with Verdict(decision="allow" | "deny" | "ask", reason=...),
        or return None to leave the call to the policies after this one.
        """
        register = self.waterfall(_events.APPROVAL, prepend=prepend)
        return register(fn) if fn is not None else register

    def on(self, event):
        """A notification listener: fn(payload). Its exception is logged by the host."""
        if event in _events.WATERFALLS:
            raise ValueError("%r is a waterfall: use @plugin.waterfall (or admission, approval)" % event)
        self._claim(event)

        def register(fn):
            self._listeners.append(pb.Listener(event=event, kind=pb.KIND_EMIT))
            self._notifications[event] = fn
            return fn
        return register

    def tool(self, name, description, parameters=None, parallel_safe=False, approval=""):
        """Give the model a tool: fn(args: dict, ctx: ToolContext) -> result.

        parameters is the JSON Schema of args (a dict or JSON text); the
        host validates every call against it before the handler runs. The
        result is a str, a list of content parts (tools.text, tools.image),
        an events_pb2.ToolResult, or anything JSON. Raise ToolError for a
        failure the model should read; any other exception is an error for
        the host. approval is the call's default when no policy decides.
        """
        if not TOOL_NAME.match(name):
            raise ValueError("tool name %r must match ^[a-zA-Z0-9_-]{1,64}$ (providers refuse others)" % name)
        if approval not in APPROVALS:
            raise ValueError("tool %s: approval must be one of allow, ask, deny or empty, not %r" % (name, approval))
        if name in self._tools:
            raise ValueError("tool %s is declared twice" % name)
        decl = pb.ToolDecl(name=name, description=description, parameters=schema_text(parameters),
                           parallel_safe=parallel_safe, approval=approval)

        def register(fn):
            self._tools[name] = _Tool(decl, fn)
            return fn
        return register

    def _claim(self, event):
        # The host knows one listener per event and plugin: a second
        # handler would silently replace the first.
        if any(l.event == event for l in self._listeners):
            raise ValueError("plugin %s already listens to %s; one handler per event" % (self.name, event))

    @property
    def workers(self):
        """The handler slots, sized on first use (see concurrency)."""
        if self._workers is None:
            self._workers = Workers(concurrency_from(self._concurrency))
        return self._workers

    def _limited(self, fn):
        """fn as a unary handler that holds a slot while it runs, refused at
        once when none is free."""
        def handler(request, context):
            slot = self.workers.acquire()
            if slot is None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.workers.refusal(self.name))
            context.add_callback(slot.abandon)
            try:
                return fn(request, context)
            finally:
                slot.release()
        return handler

    def _health(self, request, context):
        # NOT_SERVING only when nothing can ever be served again: busy
        # alone is back-pressure, not a reason to restart.
        return _NOT_SERVING if self.workers.jammed() else _SERVING

    # The protocol.

    def describe(self, request):
        """The DescribeResponse for a DescribeRequest."""
        self.host_capabilities = list(request.capabilities)
        from . import __version__  # here: the package imports this module
        return pb.DescribeResponse(name=self.name, version=self.version, listeners=self._listeners,
                                   tools=[t.decl for t in self._tools.values()],
                                   requires=self.requires, accepts=list(ACCEPTS),
                                   sdk="python/" + __version__)

    def _describe(self, request, context):
        return self.describe(request)

    def _configure_rpc(self, request, context):
        self.entry_id = request.entry_id
        if self._configure is None:
            return pb.ConfigureResponse()
        try:
            config = json.loads(request.config_json or b"{}")
            self._configure(config)
        except Exception as e:  # noqa: BLE001 -- any failure becomes the start's error
            self.log.error("configure failed", exc_info=True)
            return pb.ConfigureResponse(error=error_to_proto(e, "the configure handler"))
        return pb.ConfigureResponse()

    def _emit_one(self, request):
        fn = self._notifications.get(request.event)
        if fn is None:
            return PluginError(_errors.NO_HANDLER, "plugin %s has no listener for %s" % (self.name, request.event)).to_proto()
        try:
            fn(_events.payload_value(request.payload, _events.NOTIFICATIONS.get(request.event)))
        except Exception as e:  # noqa: BLE001
            self.log.error("listener of %s failed" % request.event, exc_info=True)
            return error_to_proto(e, "the listener of %s" % request.event)
        return None

    def _emit(self, request, context):
        err = self._emit_one(request)
        return pb.EmitResponse(error=err) if err is not None else pb.EmitResponse()

    def _emit_batch(self, request, context):
        out = pb.EmitBatchResponse()
        for i, emit in enumerate(request.emits):
            err = self._emit_one(emit)
            if err is not None:
                out.failures.add(index=i, error=err)
        return out

    def _execute_tool(self, request, context):
        tool = self._tools.get(request.call.name)
        if tool is None:
            return pb.ToolOutcome(error=PluginError(
                _errors.NO_HANDLER, "plugin %s declares no tool %r" % (self.name, request.call.name)).to_proto())
        ctx = ToolContext(request, self.log)
        context.add_callback(ctx.cancelled.set)
        try:
            args = json.loads(request.call.arguments or "{}")
        except ValueError as e:
            return pb.ToolOutcome(result=events.ToolResult(
                is_error=True, content="the arguments of %s are not JSON (%s); send a JSON object" % (tool.decl.name, e)))
        try:
            value = tool.fn(args, ctx)
            if value is None:
                return pb.ToolOutcome(error=PluginError(
                    _errors.EMPTY_RESULT,
                    "plugin %s: the tool %r returned None; return a str, a result or raise ToolError, "
                    "or return dsh_plugin.empty() for a deliberately empty result" % (self.name, tool.decl.name),
                    reason="sdk/empty-result").to_proto())
            return pb.ToolOutcome(result=to_result(value))
        except ToolError as e:
            return pb.ToolOutcome(result=events.ToolResult(is_error=True, content=str(e)))
        except Exception as e:  # noqa: BLE001
            self.log.error("tool %s failed" % tool.decl.name, exc_info=True)
            return pb.ToolOutcome(error=error_to_proto(e, "tool %s" % tool.decl.name))

    def _call(self, requests, context):
        slot = self.workers.acquire()
        if slot is None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.workers.refusal(self.name))
        out = queue.Queue()

        def ended():
            # The host ended the call: a handler still running keeps its
            # slot, but this gRPC thread is free to serve others.
            slot.abandon()
            out.put(None)
        context.add_callback(ended)
        threading.Thread(target=self._run_call, args=(requests, out, slot), daemon=True).start()
        while True:
            msg = out.get()
            if msg is None:
                return
            yield msg

    def _run_call(self, requests, out, slot):
        try:
            try:
                first = next(requests)
            except (StopIteration, grpc.RpcError):
                return
            out.put(pb.PluginMessage(result=self._waterfall_result(first.start, requests, out)))
        finally:
            slot.release()
            out.put(None)

    def _waterfall_result(self, start, requests, out):
        fn = self._waterfalls.get(start.event)
        if fn is None:
            return pb.CallResult(error=PluginError(
                _errors.NO_HANDLER, "plugin %s has no listener for %s" % (self.name, start.event)).to_proto())
        pfield, rfield = _events.WATERFALLS[start.event]
        state = {"called": False, "answer": None}

        def call_next(payload=None):
            if state["called"]:
                raise PluginError(_errors.HANDLER_FAILED, "next was called twice in one %s call; call it once" % start.event)
            state["called"] = True
            req = pb.NextRequest()
            if payload is not None:
                req.payload.CopyFrom(events.Payload(**{pfield: payload}))
            out.put(pb.PluginMessage(next=req))
            try:
                answer = next(requests).next_result
            except (StopIteration, grpc.RpcError):
                raise PluginError("CANCELLED", "the host cancelled the %s call" % start.event)
            if answer.HasField("error"):
                raise PluginError.from_proto(answer.error)
            state["answer"] = getattr(answer.result, rfield) if answer.result.HasField(rfield) else None
            return state["answer"]

        try:
            result = fn(_events.payload_value(start.payload, pfield), call_next)
            if result is None:
                result = state["answer"] if state["called"] else call_next()
            if result is None:
                return pb.CallResult(result=events.Result())
            return pb.CallResult(result=events.Result(**{rfield: result}))
        except Exception as e:  # noqa: BLE001
            if not isinstance(e, PluginError):
                self.log.error("listener of %s failed" % start.event, exc_info=True)
            return pb.CallResult(error=error_to_proto(e, "the listener of %s" % start.event))

    def rpc_handlers(self, shutdown=None):
        """The generic handlers of every service the host calls.

        shutdown runs on GRPCController/Shutdown (serve() stops its server);
        tests serve the handlers on a server of their own.
        """
        def unary(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(fn, req.FromString, resp.SerializeToString)

        def stop(request, context):
            if shutdown is not None:
                # Answer first: the host waits for the reply, then the process.
                threading.Timer(0.05, shutdown).start()
            return b""

        return [
            grpc.method_handlers_generic_handler(SERVICE, {
                "Describe": unary(self._describe, pb.DescribeRequest, pb.DescribeResponse),
                "Configure": unary(self._configure_rpc, pb.ConfigureRequest, pb.ConfigureResponse),
                "Call": grpc.stream_stream_rpc_method_handler(
                    self._call, pb.HostMessage.FromString, pb.PluginMessage.SerializeToString),
                "Emit": unary(self._limited(self._emit), pb.EmitRequest, pb.EmitResponse),
                "EmitBatch": unary(self._limited(self._emit_batch), pb.EmitBatchRequest, pb.EmitBatchResponse),
                "ExecuteTool": unary(self._limited(self._execute_tool), pb.ToolInvocation, pb.ToolOutcome),
            }),
            # go-plugin's health check of service "plugin", which dsh asks
            # on an interval and after a call timed out. The messages are
            # not modelled here: the answer is one of two constant bytes.
            grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
                "Check": grpc.unary_unary_rpc_method_handler(self._health),
            }),
            grpc.method_handlers_generic_handler("plugin.GRPCController", {
                "Shutdown": grpc.unary_unary_rpc_method_handler(stop),
            }),
        ]

    def serve(self, concurrency=None, max_workers=None):
        """Serve the host until it stops the plugin; never returns normally.

        concurrency overrides the Plugin's (max_workers is its old name).
        Run by hand rather than by dsh, it says so on stderr and exits 1.
        """
        if concurrency is None:
            concurrency = max_workers
        if concurrency is not None:
            self._concurrency, self._workers = concurrency, None
        try:
            check_environment()
        except HandshakeError as e:
            sys.stderr.write("%s\n" % e)
            sys.exit(1)
        # Started by dsh, the whole process group dies with dsh, even when
        # dsh is SIGKILLed: processes the plugin started included.
        watch_host()
        # Records of any logger (the plugin's libraries included) reach the
        # host's log as hclog lines, unless the plugin set logging up itself.
        if not logging.root.handlers:
            logging.root.addHandler(HostLogHandler())
        cert = ServerCert()
        try:
            limit = self.workers.limit
        except ValueError as e:
            sys.stderr.write("plugin %s: %s\n" % (self.name, e))
            sys.exit(1)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=limit + _RESERVE))
        server.add_generic_rpc_handlers(self.rpc_handlers(shutdown=lambda: server.stop(0)))
        creds = grpc.ssl_server_credentials([(cert.key_pem, cert.cert_pem)],
                                            root_certificates=os.environ["PLUGIN_CLIENT_CERT"].encode(),
                                            require_client_auth=True)
        port = server.add_secure_port("127.0.0.1:0", creds)
        server.start()
        # Nothing may reach stdout before this line; log to stderr.
        sys.stdout.write(handshake_line(port, cert.der) + "\n")
        sys.stdout.flush()
        server.wait_for_termination()
