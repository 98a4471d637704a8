"""Logging to the host, the host pipe, and the handshake with AutoMTLS,
each against a real process where one is involved."""

import base64
import datetime
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
import unittest

import grpc

import harness  # noqa: F401 -- puts the package on sys.path

from dsh_plugin import pb
from dsh_plugin.handshake import COOKIE_KEY, COOKIE_VALUE, HandshakeError, ServerCert, check_environment, handshake_line
from dsh_plugin.hostwatch import watch_host
from dsh_plugin.log import HostLogHandler

WAIT = 10
SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


class LogTest(unittest.TestCase):
    def test_lines_are_hclog_json(self):
        out = io.StringIO()
        log = logging.getLogger("dsh-test-log")
        log.addHandler(HostLogHandler(out))
        log.setLevel(logging.DEBUG)
        log.propagate = False
        log.warning("disk %s", "full", extra={"fields": {"free": 0, "path": "/x"}})
        try:
            raise ValueError("v")
        except ValueError:
            log.error("failed", exc_info=True)
        first, second = [json.loads(l) for l in out.getvalue().splitlines()]
        self.assertEqual((first["@level"], first["@message"], first["@module"], first["free"], first["path"]),
                         ("warn", "disk full", "dsh-test-log", 0, "/x"))
        # go-plugin parses exactly 2006-01-02T15:04:05.000000Z07:00.
        datetime.datetime.strptime(first["@timestamp"], "%Y-%m-%dT%H:%M:%S.%f%z")
        self.assertEqual(second["@level"], "error")
        self.assertIn("ValueError: v", second["error"])


class HostWatchTest(unittest.TestCase):
    def test_not_started_by_dsh_does_nothing(self):
        self.assertFalse(watch_host(lambda: None, environ={}))
        self.assertFalse(watch_host(lambda: None, environ={"DSH_HOST_FD": "x"}))
        with open(os.devnull) as f:  # a descriptor that is not a pipe
            self.assertFalse(watch_host(lambda: None, environ={"DSH_HOST_FD": str(f.fileno())}))

    def test_the_group_dies_with_the_host(self):
        """A plugin that started a process of its own: once the host's end of
        the pipe closes, both are gone."""
        self.check_group_dies(kill_plugin=False)

    def test_the_group_dies_when_the_kernel_kills_the_plugin_first(self):
        """dsh's death SIGKILLs the plugin (its parent-death signal) before
        its watcher can run: the helper still takes the group down."""
        self.check_group_dies(kill_plugin=True)

    def check_group_dies(self, kill_plugin):
        r, w = os.pipe()
        script = ("import os, subprocess, sys, time\n"
                  "sys.path.insert(0, %r)\n"
                  "from dsh_plugin.hostwatch import watch_host\n"
                  "child = subprocess.Popen(['sleep', '60'])\n"
                  "assert watch_host()\n"
                  "print(child.pid, flush=True)\n"
                  "time.sleep(60)\n") % SDK
        env = dict(os.environ, DSH_HOST_FD=str(r))
        proc = subprocess.Popen([sys.executable, "-c", script], env=env, pass_fds=(r,), stdout=subprocess.PIPE,
                                start_new_session=True)
        os.close(r)
        try:
            grandchild = int(proc.stdout.readline())
            self.assertTrue(alive(grandchild))
            if kill_plugin:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=WAIT)
            os.close(w)  # the host is gone
            proc.wait(timeout=WAIT)
            self.assertEqual(proc.returncode, -signal.SIGKILL)
            deadline = time.monotonic() + WAIT
            while alive(grandchild) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertFalse(alive(grandchild), "the plugin's own child outlived the host")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()


class HandshakeTest(unittest.TestCase):
    def test_environment_checks(self):
        with self.assertRaisesRegex(HandshakeError, "mount it with exec:"):
            check_environment({})
        with self.assertRaisesRegex(HandshakeError, "protocol 2 only; the host offers 1"):
            check_environment({COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "1", "PLUGIN_CLIENT_CERT": "x"})
        with self.assertRaisesRegex(HandshakeError, "PLUGIN_CLIENT_CERT"):
            check_environment({COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "1,2"})
        check_environment({COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "1,2", "PLUGIN_CLIENT_CERT": "x"})

    def test_line(self):
        self.assertEqual(handshake_line(4000, b"\x01\x02\x03\x04"), "1|2|tcp|127.0.0.1:4000|grpc|AQIDBA")

    def test_run_by_hand_says_so(self):
        env = {k: v for k, v in os.environ.items() if k != COOKIE_KEY}
        env["PYTHONPATH"] = SDK
        out = subprocess.run([sys.executable, "-c", "from dsh_plugin import Plugin; Plugin('x').serve()"],
                             env=env, capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(out.returncode, 1)
        self.assertIn("mount it with exec:", out.stderr)
        self.assertEqual(out.stdout, "")

    def test_serves_mtls_to_the_host_certificate_only(self):
        """serve() as the host starts it: the handshake line, TLS with the
        server certificate it names, the host's client certificate required."""
        client = ServerCert()  # the host's AutoMTLS certificate
        env = dict(os.environ, PYTHONPATH=SDK, PLUGIN_PROTOCOL_VERSIONS="2",
                   PLUGIN_CLIENT_CERT=client.cert_pem.decode(), **{COOKIE_KEY: COOKIE_VALUE})
        env.pop("DSH_HOST_FD", None)
        proc = subprocess.Popen([sys.executable, "-c", "from dsh_plugin import Plugin; Plugin('mtls', '9').serve()"],
                                env=env, stdout=subprocess.PIPE, text=True)
        try:
            fields = proc.stdout.readline().strip().split("|")
            self.assertEqual(fields[:3] + [fields[4]], ["1", "2", "tcp", "grpc"])
            der = base64.b64decode(fields[5] + "=" * (-len(fields[5]) % 4))
            from cryptography import x509
            from cryptography.hazmat.primitives import serialization
            server_pem = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
            opts = (("grpc.ssl_target_name_override", "localhost"),)
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=client.key_pem,
                                                 certificate_chain=client.cert_pem)
            with grpc.secure_channel(fields[3], creds, options=opts) as ch:
                describe = ch.unary_unary("/dsh.plugin.v1.Plugin/Describe", request_serializer=pb.DescribeRequest.SerializeToString,
                                          response_deserializer=pb.DescribeResponse.FromString)
                self.assertEqual(describe(pb.DescribeRequest(), timeout=WAIT).name, "mtls")
                self.assertEqual(ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=WAIT), b"\x08\x01")
            stranger = ServerCert()
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=stranger.key_pem,
                                                 certificate_chain=stranger.cert_pem)
            with grpc.secure_channel(fields[3], creds, options=opts) as ch:
                with self.assertRaises(grpc.RpcError):
                    ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=WAIT)
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=client.key_pem,
                                                 certificate_chain=client.cert_pem)
            with grpc.secure_channel(fields[3], creds, options=opts) as ch:
                ch.unary_unary("/plugin.GRPCController/Shutdown")(b"", timeout=WAIT)
            self.assertEqual(proc.wait(timeout=WAIT), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
