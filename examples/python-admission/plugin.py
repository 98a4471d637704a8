#!/usr/bin/python3
"""A dsh admission plugin in Python, speaking sdk/proto/pluginv1/plugin.proto.

It refuses messages that contain the configured word and admits the rest,
exactly like examples/plugin-admission does in Go. Everything the Go SDK
does for you is spelled out here: the go-plugin handshake with AutoMTLS,
the gRPC services the host expects, and the Call stream with next.

Needs grpcio, protobuf and cryptography (Debian: python3-grpcio
python3-protobuf python3-cryptography). plugin_pb2.py and events_pb2.py,
the typed classes of every event, are generated from the .proto files by
sdk/proto/pluginv1/generate.sh.
"""

import base64
import datetime
import json
import os
import sys
import threading
from concurrent import futures

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import events_pb2 as events  # noqa: E402
import plugin_pb2 as pb  # noqa: E402

COOKIE_KEY, COOKIE_VALUE = "DSH_PLUGIN_MAGIC_COOKIE", "d5h-pl4g1n-8c0f"
SERVICE = "dsh.plugin.v1.Plugin"
config = {}


def describe(request, context):
    return pb.DescribeResponse(name="no-secrets-py", version="1.0.0", listeners=[
        pb.Listener(event="agent-controller/admission", kind=pb.KIND_WATERFALL)])


def configure(request, context):
    config.update(json.loads(request.config_json or b"{}"))
    return pb.ConfigureResponse()


def call(requests, context):
    """One admission: refuse, or ask the host for next and pass its answer on."""
    start = next(requests).start
    admission = start.payload.admission  # an events_pb2.Admission
    word = config.get("word", "")
    if word and word in admission.message.content.lower():
        decision = events.Decision(kind="reject", reason="no-secrets/word",
                                   message="Please do not send %ss to the agent." % word)
        yield pb.PluginMessage(result=pb.CallResult(result=events.Result(decision=decision)))
        return
    yield pb.PluginMessage(next=pb.NextRequest())  # run the rest of the chain
    answer = next(requests).next_result
    if answer.HasField("error"):
        yield pb.PluginMessage(result=pb.CallResult(error=answer.error))
    else:
        yield pb.PluginMessage(result=pb.CallResult(result=answer.result))


def emit(request, context):
    return pb.EmitResponse()


def raw(handler):
    # Messages the plugin does not model itself travel as raw bytes.
    return handler(lambda req, ctx: b"", request_deserializer=None, response_serializer=None)


def main():
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.exit("This is a dsh plugin binary: mount it with exec: in config.yaml.")
    if "2" not in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "2").split(","):
        sys.exit("This plugin speaks dsh plugin protocol 2 only; the host offers %s."
                 % os.environ.get("PLUGIN_PROTOCOL_VERSIONS"))

    # AutoMTLS: a self-signed certificate for "localhost", trusted by the
    # host through the handshake line; the host's own certificate arrives
    # in PLUGIN_CLIENT_CERT and is the only client accepted.
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=True,
                                         key_agreement=True, content_commitment=False, data_encipherment=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    client_cert = os.environ["PLUGIN_CLIENT_CERT"].encode()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler(SERVICE, {
            "Describe": grpc.unary_unary_rpc_method_handler(
                describe, pb.DescribeRequest.FromString, pb.DescribeResponse.SerializeToString),
            "Configure": grpc.unary_unary_rpc_method_handler(
                configure, pb.ConfigureRequest.FromString, pb.ConfigureResponse.SerializeToString),
            "Call": grpc.stream_stream_rpc_method_handler(
                call, pb.HostMessage.FromString, pb.PluginMessage.SerializeToString),
            "Emit": grpc.unary_unary_rpc_method_handler(
                emit, pb.EmitRequest.FromString, pb.EmitResponse.SerializeToString),
        }),
        # go-plugin's health check: status SERVING (field 1 = 1).
        grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"\x08\x01"),
        }),
        # go-plugin asks the plugin to shut down gracefully on dispose.
        grpc.method_handlers_generic_handler("plugin.GRPCController", {
            "Shutdown": grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: (threading.Timer(0.1, server.stop, args=(0,)).start(), b"")[1]),
        }),
    ])
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_cert,
                                        require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    der = cert.public_bytes(serialization.Encoding.DER)
    # core protocol | app protocol | network | address | protocol | server cert
    print("1|2|tcp|127.0.0.1:%d|grpc|%s" % (port, base64.b64encode(der).decode().rstrip("=")), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
