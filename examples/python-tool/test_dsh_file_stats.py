"""file_stats through the real protocol, without dsh: in this process, and
as the child process dsh would start. Run: python3 -m unittest -v
(with dsh_plugin importable: installed, or PYTHONPATH=sdk/python)."""

import os
import sys
import tempfile
import unittest

from dsh_plugin.testing import PluginHarness

import dsh_file_stats

HERE = os.path.dirname(os.path.abspath(__file__))


class FileStatsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        for name, body in {"a.txt": "one two\nthree\n", "b.txt": "four\n"}.items():
            with open(os.path.join(self.tmp.name, name), "w") as f:
                f.write(body)

    def check(self, h):
        self.assertEqual(h.tools(), ["file_stats"])
        res = h.call_tool("file_stats", {"pattern": "*.txt"}, workspace=self.tmp.name)
        self.assertFalse(res.is_error)
        self.assertEqual(res.content, "lines words bytes file\n2 3 14 a.txt\n1 1 5 b.txt\n3 4 19 total")
        res = h.call_tool("file_stats", {"pattern": "../*"}, workspace=self.tmp.name)
        self.assertTrue(res.is_error)
        self.assertIn("leaves the workspace", res.content)

    def test_in_process(self):
        with PluginHarness(dsh_file_stats.plugin) as h:
            self.check(h)

    def test_as_a_child_process(self):
        # As a module, so the test runs whichever dsh_file_stats is
        # importable: this folder's, or the installed package's.
        path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH", "")) if p)
        with PluginHarness.child([sys.executable, "-m", "dsh_file_stats"], env={"PYTHONPATH": path}) as h:
            self.check(h)
            self.assertEqual(h.health(), "SERVING")

    def test_a_bad_config_is_refused(self):
        with self.assertRaisesRegex(Exception, "max_files must be at least 1"):
            PluginHarness(dsh_file_stats.plugin, config={"max_files": 0})


if __name__ == "__main__":
    unittest.main()
