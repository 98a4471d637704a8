"""The Plugin's answers to each RPC of the protocol, over real gRPC."""

import json
import queue
import threading
import unittest

import grpc

from harness import Served

from dsh_plugin import HANDLER_FAILED, NO_HANDLER, Plugin, PluginError, ToolError, events, image, pb, text

WAIT = 10  # seconds: a deadline for anything a test waits on


def admission_start(content):
    return pb.HostMessage(start=pb.CallStart(event="agent-controller/admission", scope_tag="main", payload=events.Payload(
        admission=events.Admission(agent_id="main", message=events.Message(role="user", content=content)))))


class Host:
    """The host's side of one Call stream: it sends what the test puts."""

    def __init__(self, served, start):
        self.q = queue.Queue()
        self.q.put(start)
        self.replies = served.call(iter(self.q.get, None), timeout=WAIT)

    def recv(self):
        return next(self.replies)

    def send(self, msg):
        self.q.put(msg)

    def close(self):
        self.q.put(None)


class ProtocolTest(unittest.TestCase):
    def setUp(self):
        self.plugin = Plugin("test-plugin", "1.2.3", requires=["tools"])
        self.served = None

    def serve(self):
        self.served = Served(self.plugin)
        return self.served

    def tearDown(self):
        if self.served:
            self.served.close()

    def test_describe_declares_listeners_tools_and_accepts(self):
        p = self.plugin
        p.admission(lambda payload, next: None)
        p.on("agent/status")(lambda payload: None)
        p.tool("word_count", "Count words.", parameters={"type": "object"}, parallel_safe=True,
               approval="ask")(lambda args, ctx: "")
        s = self.serve()
        d = s.describe(pb.DescribeRequest(protocol_version=2, capabilities=["tools", "emit-batch"]), timeout=WAIT)
        self.assertEqual((d.name, d.version), ("test-plugin", "1.2.3"))
        self.assertEqual([(l.event, l.kind) for l in d.listeners],
                         [("agent-controller/admission", pb.KIND_WATERFALL), ("agent/status", pb.KIND_EMIT)])
        self.assertEqual(len(d.tools), 1)
        t = d.tools[0]
        self.assertEqual((t.name, t.description, json.loads(t.parameters), t.parallel_safe, t.approval),
                         ("word_count", "Count words.", {"type": "object"}, True, "ask"))
        self.assertEqual(list(d.accepts), ["emit-batch"])
        self.assertEqual(list(d.requires), ["tools"])
        self.assertEqual(p.host_capabilities, ["tools", "emit-batch"])

    def test_tool_declarations_are_checked(self):
        with self.assertRaisesRegex(ValueError, "must match"):
            self.plugin.tool("bad name", "x")
        with self.assertRaisesRegex(ValueError, "approval"):
            self.plugin.tool("ok", "x", approval="maybe")
        with self.assertRaisesRegex(ValueError, "JSON Schema object"):
            self.plugin.tool("ok", "x", parameters="[1]")
        with self.assertRaisesRegex(ValueError, "not a waterfall"):
            self.plugin.waterfall("agent/status")
        with self.assertRaisesRegex(ValueError, "is a waterfall"):
            self.plugin.on("tools/approve")
        self.plugin.on("agent/status")(print)
        with self.assertRaisesRegex(ValueError, "already listens to agent/status"):
            self.plugin.on("agent/status")
        self.plugin.admission(print)
        with self.assertRaisesRegex(ValueError, "already listens to agent-controller/admission"):
            self.plugin.admission(print)

    def test_configure_passes_the_config_and_reports_exceptions(self):
        seen = []

        @self.plugin.configure
        def configure(config):
            seen.append(config)
            if config.get("bad"):
                raise ValueError("bad must be false")
            if config.get("coded"):
                raise PluginError("MY_CODE", "coded failure", reason="my/reason")
        s = self.serve()
        r = s.configure(pb.ConfigureRequest(config_json=b'{"word": "x"}', entry_id="e1"), timeout=WAIT)
        self.assertFalse(r.HasField("error"))
        self.assertEqual(seen, [{"word": "x"}])
        self.assertEqual(self.plugin.entry_id, "e1")
        r = s.configure(pb.ConfigureRequest(config_json=b'{"bad": true}'), timeout=WAIT)
        self.assertEqual(r.error.code, HANDLER_FAILED)
        self.assertIn("ValueError: bad must be false", r.error.message)
        r = s.configure(pb.ConfigureRequest(config_json=b'{"coded": true}'), timeout=WAIT)
        self.assertEqual((r.error.code, r.error.reason, r.error.message), ("MY_CODE", "my/reason", "coded failure"))

    def test_admission_refuses_without_next(self):
        @self.plugin.admission
        def admission(payload, next):
            if "spam" in payload.message.content:
                return events.Decision(kind="reject", reason="r", message="no spam")
            return None
        host = Host(self.serve(), admission_start("buy spam"))
        res = host.recv().result
        self.assertEqual((res.result.decision.kind, res.result.decision.reason), ("reject", "r"))
        host.close()

    def test_none_passes_on_what_next_returns(self):
        self.plugin.admission(lambda payload, next: None)
        host = Host(self.serve(), admission_start("hello"))
        msg = host.recv()
        self.assertTrue(msg.HasField("next"))
        self.assertFalse(msg.next.HasField("payload"), "no replacement: the original passes on")
        host.send(pb.HostMessage(next_result=pb.NextResult(result=events.Result(decision=events.Decision(kind="admit")))))
        self.assertEqual(host.recv().result.result.decision.kind, "admit")
        host.close()

    def test_next_with_a_replacement_payload(self):
        @self.plugin.admission
        def admission(payload, next):
            payload.message.content = payload.message.content.upper()
            d = next(payload)
            return events.Decision(kind=d.kind, reason="seen-" + d.reason)
        host = Host(self.serve(), admission_start("hello"))
        msg = host.recv()
        self.assertEqual(msg.next.payload.admission.message.content, "HELLO")
        host.send(pb.HostMessage(next_result=pb.NextResult(result=events.Result(decision=events.Decision(kind="admit", reason="x")))))
        self.assertEqual(host.recv().result.result.decision.reason, "seen-x")
        host.close()

    def test_an_error_from_next_keeps_its_code(self):
        self.plugin.admission(lambda payload, next: next())
        host = Host(self.serve(), admission_start("hello"))
        host.recv()
        host.send(pb.HostMessage(next_result=pb.NextResult(error=pb.Error(
            code="AGENT_ADMISSION_REJECTED", reason="later/refused", message="m", cause=pb.Error(code="INNER")))))
        err = host.recv().result.error
        self.assertEqual((err.code, err.reason, err.cause.code), ("AGENT_ADMISSION_REJECTED", "later/refused", "INNER"))
        host.close()

    def test_a_raising_handler_is_an_error_and_the_plugin_lives_on(self):
        calls = []

        @self.plugin.admission
        def admission(payload, next):
            calls.append(1)
            if len(calls) == 1:
                raise KeyError("boom")
            return events.Decision(kind="admit")
        s = self.serve()
        host = Host(s, admission_start("a"))
        err = host.recv().result.error
        self.assertEqual(err.code, HANDLER_FAILED)
        self.assertIn("KeyError", err.message)
        host.close()
        host = Host(s, admission_start("b"))
        self.assertEqual(host.recv().result.result.decision.kind, "admit")
        host.close()

    def test_a_wrong_result_type_is_an_error(self):
        self.plugin.admission(lambda payload, next: events.Verdict(decision="allow"))
        host = Host(self.serve(), admission_start("a"))
        self.assertEqual(host.recv().result.error.code, HANDLER_FAILED)
        host.close()

    def test_approval_policy_answers_a_verdict(self):
        @self.plugin.approval
        def approve(approval, next):
            if approval.call.name == "rm":
                return events.Verdict(decision="deny", reason="never rm", source="policy")
            return None
        start = pb.HostMessage(start=pb.CallStart(event="tools/approve", payload=events.Payload(
            approval=events.Approval(agent_id="main", call=events.ToolCall(id="c1", name="rm", arguments="{}")))))
        host = Host(self.serve(), start)
        v = host.recv().result.result.verdict
        self.assertEqual((v.decision, v.reason, v.source), ("deny", "never rm", "policy"))
        host.close()

    def test_an_event_without_listener_is_an_error(self):
        start = pb.HostMessage(start=pb.CallStart(event="agent/request"))
        host = Host(self.serve(), start)
        self.assertEqual(host.recv().result.error.code, NO_HANDLER)
        host.close()

    def test_emit_and_emit_batch(self):
        seen = []

        @self.plugin.on("agent/status")
        def status(payload):
            if payload.to == "bad":
                raise RuntimeError("cannot")
            seen.append((payload.agent_id, getattr(payload, "from"), payload.to))
        s = self.serve()

        def emit(to):
            return pb.EmitRequest(event="agent/status", payload=events.Payload(
                status=events.StatusChange(agent_id="main", to=to, **{"from": "idle"})))
        self.assertFalse(s.emit(emit("running"), timeout=WAIT).HasField("error"))
        r = s.emit_batch(pb.EmitBatchRequest(emits=[emit("a"), emit("bad"), emit("b"),
                                                    pb.EmitRequest(event="session/event")]), timeout=WAIT)
        self.assertEqual([(f.index, f.error.code) for f in r.failures], [(1, HANDLER_FAILED), (3, NO_HANDLER)])
        self.assertEqual(seen, [("main", "idle", "running"), ("main", "idle", "a"), ("main", "idle", "b")])

    def invoke(self, name, arguments, **kw):
        return self.served.execute_tool(pb.ToolInvocation(
            agent_id="main", workspace="/ws", call=events.ToolCall(id="c1", name=name, arguments=arguments)), **kw)

    def test_tools(self):
        @self.plugin.tool("echo", "Echo.", parameters={"type": "object"})
        def echo(args, ctx):
            if args.get("fail") == "tool":
                raise ToolError("cannot echo that; try another word")
            if args.get("fail") == "bug":
                raise ZeroDivisionError("oops")
            if args.get("parts"):
                return [text("a"), image("image/png", b"\x89PNG")]
            return "%s %s %s" % (args["word"], ctx.workspace, ctx.call_id)
        self.serve()
        self.assertEqual(self.invoke("echo", '{"word": "hi"}', timeout=WAIT).result.content, "hi /ws c1")
        r = self.invoke("echo", '{"fail": "tool"}', timeout=WAIT).result
        self.assertEqual((r.is_error, r.content), (True, "cannot echo that; try another word"))
        e = self.invoke("echo", '{"fail": "bug"}', timeout=WAIT).error
        self.assertEqual(e.code, HANDLER_FAILED)
        self.assertIn("tool echo raised ZeroDivisionError", e.message)
        parts = self.invoke("echo", '{"parts": true}', timeout=WAIT).result.parts
        self.assertEqual((parts[0].text, parts[1].image.media_type, parts[1].image.data), ("a", "image/png", b"\x89PNG"))
        r = self.invoke("echo", "{not json", timeout=WAIT).result
        self.assertTrue(r.is_error)
        self.assertIn("not JSON", r.content)
        self.assertEqual(self.invoke("nope", "{}", timeout=WAIT).error.code, NO_HANDLER)

    def test_a_cancelled_call_sets_the_tool_context(self):
        started, outcome = threading.Event(), queue.Queue()

        @self.plugin.tool("wait", "Wait until cancelled.")
        def wait(args, ctx):
            started.set()
            outcome.put(ctx.cancelled.wait(WAIT) and ctx.is_cancelled())
            return "done"
        self.serve()
        fut = self.served.execute_tool.future(pb.ToolInvocation(call=events.ToolCall(name="wait")), timeout=WAIT * 2)
        self.assertTrue(started.wait(WAIT), "the tool never started")
        fut.cancel()
        self.assertTrue(outcome.get(timeout=WAIT * 2), "the cancellation never reached the tool's context")
        with self.assertRaises(grpc.FutureCancelledError):
            fut.result()

    def test_health_and_shutdown(self):
        s = self.serve()
        self.assertEqual(s.health(b"", timeout=WAIT), b"\x08\x01")
        s.shutdown(b"", timeout=WAIT)
        deadline = threading.Event()
        for _ in range(200):
            if s.stopped:
                break
            deadline.wait(0.05)
        self.assertTrue(s.stopped, "Shutdown must stop the plugin")


if __name__ == "__main__":
    unittest.main()
