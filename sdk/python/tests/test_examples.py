"""The examples' handlers (examples/python-*), called directly."""

import importlib.util
import os
import tempfile
import unittest

import harness  # noqa: F401 -- puts the package on sys.path

from dsh_plugin import ToolError, events, pb
from dsh_plugin.tools import ToolContext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(name, module="plugin"):
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), os.path.join(REPO, "examples", name, module + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FileStatsTest(unittest.TestCase):
    def setUp(self):
        self.mod = load("python-tool", "dsh_file_stats")
        self.mod.configure({})
        self.tmp = tempfile.TemporaryDirectory()
        self.ws = os.path.join(self.tmp.name, "ws")
        os.makedirs(os.path.join(self.ws, "sub"))
        for name, body in {"a.txt": "one two\nthree\n", "sub/b.txt": "four\n", "c.md": ""}.items():
            with open(os.path.join(self.ws, name), "w") as f:
                f.write(body)
        with open(os.path.join(self.tmp.name, "outside.txt"), "w") as f:
            f.write("secret\n")
        os.symlink(os.path.join(self.tmp.name, "outside.txt"), os.path.join(self.ws, "link.txt"))

    def tearDown(self):
        self.tmp.cleanup()

    def call(self, pattern):
        ctx = ToolContext(pb.ToolInvocation(workspace=self.ws, call=events.ToolCall(name="file_stats")), None)
        return self.mod.file_stats({"pattern": pattern}, ctx), ctx

    def test_counts_matching_files_recursively(self):
        out, _ = self.call("**/*.txt")
        self.assertEqual(out, "lines words bytes file\n2 3 14 a.txt\n1 1 5 sub/b.txt\n3 4 19 total")

    def test_stays_in_the_workspace(self):
        for pattern in ("../*.txt", "/etc/*", "sub/../../*"):
            with self.assertRaisesRegex(ToolError, "leaves the workspace"):
                self.call(pattern)
        out, _ = self.call("*.txt")  # link.txt leads out of the workspace: skipped
        self.assertEqual(out, "lines words bytes file\n2 3 14 a.txt\n2 3 14 total")

    def test_no_match_is_an_error_the_model_reads(self):
        with self.assertRaisesRegex(ToolError, "no file matches"):
            self.call("*.go")

    def test_max_files(self):
        self.mod.configure({"max_files": 1})
        out, _ = self.call("**/*.txt")
        self.assertIn("more than 1 files; narrow the pattern", out)
        with self.assertRaisesRegex(ValueError, "at least 1"):
            self.mod.configure({"max_files": 0})

    def test_stops_when_cancelled(self):
        ctx = ToolContext(pb.ToolInvocation(workspace=self.ws), None)
        ctx.cancelled.set()
        self.assertEqual(self.mod.file_stats({"pattern": "*"}, ctx), "cancelled after 0 files")

    def test_declaration(self):
        d = self.mod.plugin.describe(pb.DescribeRequest())
        self.assertEqual([(t.name, t.parallel_safe, t.approval) for t in d.tools], [("file_stats", True, "allow")])


class NoSecretsTest(unittest.TestCase):
    def test_refuses_the_word_and_passes_the_rest_on(self):
        mod = load("python-admission")
        mod.configure({"word": "Password"})

        def adm(text):
            return events.Admission(message=events.Message(role="user", content=text))
        d = mod.admission(adm("my PASSWORD is 1"), None)
        self.assertEqual((d.kind, d.reason), ("reject", "no-secrets/word"))
        self.assertIsNone(mod.admission(adm("hello"), None))


if __name__ == "__main__":
    unittest.main()
