"""python -m dsh_plugin.pin: the pin: list of files and folders."""

import contextlib
import hashlib
import io
import os
import tempfile
import unittest

import harness  # noqa: F401 -- puts the package on sys.path

from dsh_plugin import pin


class PinTest(unittest.TestCase):
    def test_folders_are_walked_without_bytecode(self):
        with tempfile.TemporaryDirectory() as d:
            for name, body in {"pkg/__init__.py": b"a", "pkg/sub/m.py": b"b", "pkg/__pycache__/m.pyc": b"c",
                               "pkg/old.pyc": b"d", "run.py": b"e"}.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "wb") as f:
                    f.write(body)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                pin.main([os.path.join(d, "run.py"), os.path.join(d, "pkg")])
            want = ["pin:"]
            for name, body in (("run.py", b"e"), ("pkg/__init__.py", b"a"), ("pkg/sub/m.py", b"b")):
                want += ["  - file: " + os.path.join(d, name), "    sha256: " + hashlib.sha256(body).hexdigest()]
            self.assertEqual(out.getvalue().splitlines(), want)

    def test_a_missing_path_is_an_error(self):
        with self.assertRaisesRegex(SystemExit, "neither a file nor a folder"):
            pin.main(["/nonexistent/x"])
