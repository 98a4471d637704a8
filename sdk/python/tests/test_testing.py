"""dsh_plugin.testing: the harness against plugins in process and as
children."""

import os
import sys
import tempfile
import unittest

import harness  # noqa: F401 -- puts the package on sys.path

from dsh_plugin import Plugin, PluginError, events
from dsh_plugin.testing import PluginHarness

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHATTY = """
from dsh_plugin import Plugin
plugin = Plugin("chatty")

@plugin.tool("talk", "Print a lot, then answer.")
def talk(args, ctx):
    for i in range(20000):
        print("line %d of print debugging" % i)
    return "done"

plugin.serve()
"""


class HarnessTest(unittest.TestCase):
    def test_a_child_that_prints_a_lot_still_answers(self):
        # 20,000 lines are more than a pipe holds: the harness must read them.
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(CHATTY)
        self.addCleanup(os.remove, f.name)
        stderr = sys.stderr
        sys.stderr = open(os.devnull, "w")
        try:
            with PluginHarness.child([sys.executable, f.name], env={"PYTHONPATH": SDK}) as h:
                self.assertEqual(h.call_tool("talk").content, "done")
        finally:
            sys.stderr.close()
            sys.stderr = stderr

    def test_waterfalls_notifications_and_errors(self):
        p = Plugin("w")
        seen = []

        @p.approval
        def approve(approval, next):
            if approval.call.name == "bash":
                return events.Verdict(decision="deny", reason="no shell")
            return None

        @p.on("agent/status")
        def status(change):
            seen.append(change.to)
            if change.to == "boom":
                raise PluginError("MY_CODE", "refused", reason="my/reason")

        with PluginHarness(p) as h:
            deny = h.call("tools/approve", events.Approval(call=events.ToolCall(name="bash")))
            self.assertEqual(deny.verdict.decision, "deny")
            passed = h.call("tools/approve", events.Approval(call=events.ToolCall(name="read")),
                            on_next=lambda a: events.Result(verdict=events.Verdict(decision="allow", reason=a.call.name)))
            self.assertEqual((passed.verdict.decision, passed.verdict.reason), ("allow", "read"))
            h.emit("agent/status", events.StatusChange(to="idle"))
            with self.assertRaises(PluginError) as caught:
                h.emit("agent/status", events.StatusChange(to="boom"))
            self.assertEqual((caught.exception.code, caught.exception.reason), ("MY_CODE", "my/reason"))
            self.assertEqual(seen, ["idle", "boom"])
            with self.assertRaisesRegex(ValueError, "not a waterfall"):
                h.call("agent/status", events.StatusChange())
