"""The admission plugin through the real protocol, without dsh: in this
process, and as the child process dsh would start. Run: python3 -m
unittest -v (with dsh_plugin importable: installed, or
PYTHONPATH=sdk/python)."""

import os
import sys
import unittest

from dsh_plugin.testing import PluginHarness

import plugin

HERE = os.path.dirname(os.path.abspath(__file__))


class NoSecretsTest(unittest.TestCase):
    def check(self, h):
        self.assertEqual(h.admit("hello").kind, "admit")
        # The plugin passes a clean message on: what the rest of the chain
        # decides stands.
        self.assertEqual(h.admit("hello", decision="reject").kind, "reject")
        d = h.admit("my Password is 42")
        self.assertEqual((d.kind, d.reason), ("reject", "no-secrets/word"))
        self.assertEqual(d.message, "Please do not send passwords to the agent.")

    def test_in_process(self):
        with PluginHarness(plugin.plugin, config={"word": "password"}) as h:
            self.check(h)

    def test_as_a_child_process(self):
        with PluginHarness.child([sys.executable, os.path.join(HERE, "plugin.py")], config={"word": "password"}) as h:
            self.check(h)


if __name__ == "__main__":
    unittest.main()
