"""The go-plugin handshake and AutoMTLS, as the dsh host expects them."""

import base64
import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

COOKIE_KEY = "DSH_PLUGIN_MAGIC_COOKIE"
COOKIE_VALUE = "d5h-pl4g1n-8c0f"
#: The dsh plugin protocol this SDK speaks.
PROTOCOL_VERSION = 2
CORE_PROTOCOL_VERSION = 1


class HandshakeError(Exception):
    """The process was not started by a dsh host that speaks our protocol."""


def check_environment(environ=None):
    """Raise HandshakeError unless a dsh host speaking protocol 2 started us."""
    env = os.environ if environ is None else environ
    if env.get(COOKIE_KEY) != COOKIE_VALUE:
        raise HandshakeError("this is a dsh plugin: mount it with exec: in dsh's config.yaml "
                             "instead of running it by hand")
    offered = env.get("PLUGIN_PROTOCOL_VERSIONS", str(PROTOCOL_VERSION))
    if str(PROTOCOL_VERSION) not in [v.strip() for v in offered.split(",")]:
        raise HandshakeError("this plugin speaks dsh plugin protocol %d only; the host offers %s: "
                             "use a dsh and an SDK of the same protocol" % (PROTOCOL_VERSION, offered))
    if not env.get("PLUGIN_CLIENT_CERT"):
        raise HandshakeError("the host passed no PLUGIN_CLIENT_CERT: dsh always uses AutoMTLS, "
                             "so this host is not dsh or is too old")


class ServerCert:
    """A fresh self-signed certificate for "localhost", as go-plugin makes.

    It is a CA certificate for server and client auth: the host trusts
    exactly it, through the handshake line.
    """

    def __init__(self):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.timezone.utc)
        usage = x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=True,
                              key_agreement=True, content_commitment=False, data_encipherment=False,
                              crl_sign=False, encipher_only=False, decipher_only=False)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=1))
                .not_valid_after(now + datetime.timedelta(days=365))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(usage, critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(key, hashes.SHA256()))
        self.cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self.key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())
        self.der = cert.public_bytes(serialization.Encoding.DER)


def handshake_line(port, cert_der):
    """The one line the plugin prints on stdout once it serves.

    core protocol | app protocol | network | address | protocol | server
    cert (base64 DER without padding, as go-plugin reads it).
    """
    return "%d|%d|tcp|127.0.0.1:%d|grpc|%s" % (
        CORE_PROTOCOL_VERSION, PROTOCOL_VERSION, port, base64.b64encode(cert_der).decode().rstrip("="))
