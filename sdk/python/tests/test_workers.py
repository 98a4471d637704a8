"""Back-pressure and the health answer, over real gRPC."""

import threading
import time
import unittest

import grpc

from harness import Served
from test_protocol import WAIT, Host, admission_start

from dsh_plugin import Plugin, events, pb
from dsh_plugin.workers import CONCURRENCY_ENV, concurrency_from

SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


class WorkersTest(unittest.TestCase):
    def setUp(self):
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.plugin = Plugin("jam", concurrency=2)

        @self.plugin.admission
        def admission(payload, next):
            if payload.message.content == "hang":
                self.entered.release()
                self.release.wait()  # ignores the host's cancel, as a stuck handler does
            return events.Decision(kind="admit")

        @self.plugin.tool("echo", "Echo.")
        def echo(args, ctx):
            return "echo"

        self.served = Served(self.plugin)
        self.hosts = []

    def tearDown(self):
        self.release.set()
        for h in self.hosts:
            h.replies.cancel()
        self.served.close()

    def hang(self):
        h = Host(self.served, admission_start("hang"))
        self.hosts.append(h)
        self.assertTrue(self.entered.acquire(timeout=WAIT), "the handler did not start")
        return h

    def test_a_full_plugin_refuses_at_once_and_says_why(self):
        self.hang()
        self.hang()
        began = time.monotonic()
        with self.assertRaises(grpc.RpcError) as caught:
            next(Host(self.served, admission_start("hello")).replies)
        self.assertLess(time.monotonic() - began, 1.0, "a refusal must not wait")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("plugin jam: all 2 of its workers are busy", caught.exception.details())
        self.assertIn(CONCURRENCY_ENV, caught.exception.details())
        with self.assertRaises(grpc.RpcError) as caught:
            self.served.execute_tool(pb.ToolInvocation(call=events.ToolCall(name="echo", arguments="{}")), timeout=WAIT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # Busy is not stuck: the health check still says SERVING.
        self.assertEqual(self.served.health(b"", timeout=WAIT), SERVING)

    def test_abandoned_slots_make_the_plugin_not_serving_until_they_return(self):
        a, b = self.hang(), self.hang()
        a.replies.cancel()
        self.assertEqual(self.served.health(b"", timeout=WAIT), SERVING, "one slot still serves a live call")
        b.replies.cancel()
        deadline = time.monotonic() + WAIT
        while self.served.health(b"", timeout=WAIT) != NOT_SERVING:
            self.assertLess(time.monotonic(), deadline, "every slot abandoned must answer NOT_SERVING")
            time.sleep(0.01)
        self.release.set()
        while self.served.health(b"", timeout=WAIT) != SERVING:
            self.assertLess(time.monotonic(), deadline, "slots whose handlers returned are free again")
            time.sleep(0.01)
        h = Host(self.served, admission_start("hello"))
        self.assertEqual(h.recv().result.result.decision.kind, "admit")
        h.close()


class ToolWorkersTest(unittest.TestCase):
    def test_a_hung_tool_the_host_gave_up_on_makes_the_plugin_not_serving(self):
        release = threading.Event()
        plugin = Plugin("jam", concurrency=1)

        @plugin.tool("hang", "Hang.")
        def hang(args, ctx):
            release.wait()  # ignores ctx.cancelled, as a stuck tool does
            return "late"

        served = Served(plugin)
        self.addCleanup(served.close)
        self.addCleanup(release.set)
        with self.assertRaises(grpc.RpcError) as caught:
            served.execute_tool(pb.ToolInvocation(call=events.ToolCall(name="hang", arguments="{}")), timeout=0.2)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        deadline = time.monotonic() + WAIT
        while served.health(b"", timeout=WAIT) != NOT_SERVING:
            self.assertLess(time.monotonic(), deadline, "the one slot, abandoned, must answer NOT_SERVING")
            time.sleep(0.01)


class ConcurrencyTest(unittest.TestCase):
    def test_sources_in_order(self):
        self.assertEqual(concurrency_from(5), 5)
        import os
        old = os.environ.get(CONCURRENCY_ENV)
        try:
            os.environ[CONCURRENCY_ENV] = "7"
            self.assertEqual(concurrency_from(None), 7)
            os.environ[CONCURRENCY_ENV] = "many"
            with self.assertRaisesRegex(ValueError, "is not a number"):
                concurrency_from(None)
            del os.environ[CONCURRENCY_ENV]
            self.assertEqual(concurrency_from(None), 32)
            with self.assertRaisesRegex(ValueError, "1 or more"):
                concurrency_from(0)
        finally:
            if old is not None:
                os.environ[CONCURRENCY_ENV] = old
