"""A throw-away CA and server certificate for the emulated fleet (python ``cryptography``).

Clients verify TLS against ``ca.pem`` (the map file's ``ca_bundle``); the server certificate
carries a SAN for every bound IP address plus ``localhost``.  Keys are ECDSA P-256 and
written 0600; nothing here is a secret worth more than the emulator's lifetime.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _write(path, data, mode):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)


def make_certificates(directory, addresses, days=7):
    """Write ``ca.pem``, ``server.pem``, ``server.key`` into ``directory``.

    ``addresses``: iterable of IP address strings for the SAN.  Returns
    ``{"ca": path, "cert": path, "key": path}``.
    """
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "symphony emulator CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName("localhost")]
    seen = set()
    for addr in list(addresses) + ["127.0.0.1"]:
        if addr not in seen:
            seen.add(addr)
            sans.append(x509.IPAddress(ipaddress.ip_address(addr)))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "symphony emulated BMC")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": os.path.join(directory, "ca.pem"), "cert": os.path.join(directory, "server.pem"),
             "key": os.path.join(directory, "server.key")}
    _write(paths["ca"], ca.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(paths["cert"], cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM),
           0o644)
    _write(paths["key"], key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), 0o600)
    return paths


def server_context(paths):
    """An ``ssl.SSLContext`` for the server side from :func:`make_certificates` paths."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(paths["cert"], paths["key"])
    return ctx
