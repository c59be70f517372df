"""Certificates and keys for one testbed: a CA, the API server's serving
certificate, an admin client certificate, and the service-account key pair;
for the real node also its identities (`issue_node`).

Called by `control_plane.ControlPlane.up` before any process starts. Keys are
ECDSA P-256 (fast to generate, accepted by every component). The admin client
certificate is in group system:masters; it is what the kubeconfig, the
controller manager, the scheduler and kwok use. The CA key is kept (mode
0600, in the state directory, removed by `down`) so that the real node's
identities are issued by the same CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
_SERVER_IPS = ("127.0.0.1", "10.96.0.1")


@dataclass(frozen=True)
class PkiFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path
    ca_key: Path


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _VALIDITY)
    )


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
    subject: x509.Name,
    *,
    server: bool,
    names: tuple[str, ...] = _SERVER_NAMES,
    ips: tuple[str, ...] = _SERVER_IPS,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(subject, ca_name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _write_pair(
    directory: Path, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> None:
    (directory / f"{stem}.crt").write_bytes(_cert_pem(cert))
    key_path = directory / f"{stem}.key"
    key_path.write_bytes(_key_pem(key))
    key_path.chmod(0o600)


#: The real node's client identities: file stem -> (common name, organisation).
#: kube-proxy's user is bound to system:node-proxier by a default binding;
#: the kubelet-client one (kube-apiserver's, toward the kubelet) and CoreDNS's
#: get theirs from `node_rbac.py`.
NODE_CLIENTS = {
    "kube-proxy": ("system:kube-proxy", None),
    "coredns": ("testbed:coredns", None),
    "apiserver-kubelet-client": ("testbed:apiserver-kubelet-client", None),
}


def issue_node(directory: Path, node_name: str, node_ip: str) -> None:
    """Issue the real node's identities from the CA in `directory`.

    `node.crt` (system:node:<name> in system:nodes, the Node authorizer's
    form) is the kubelet's client identity; `kubelet.crt` its serving
    certificate, naming the node's address (kube-apiserver checks it);
    plus one client certificate per entry of NODE_CLIENTS."""
    files = files_in(directory)
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_name = _name("testbed-ca")
    key, cert = _issue(
        ca_key, ca_name, _name(f"system:node:{node_name}", "system:nodes"), server=False
    )
    _write_pair(directory, "node", key, cert)
    key, cert = _issue(
        ca_key, ca_name, _name(node_name), server=True, names=(node_name,), ips=(node_ip,)
    )
    _write_pair(directory, "kubelet", key, cert)
    for stem, (common, org) in NODE_CLIENTS.items():
        key, cert = _issue(ca_key, ca_name, _name(common, org), server=False)
        _write_pair(directory, stem, key, cert)


def generate(directory: Path, *, extra_ips: tuple[str, ...] = ()) -> PkiFiles:
    """Write a fresh CA and every certificate the testbed needs into `directory`.

    `extra_ips`: more addresses the API server's certificate names (the one
    the real node's pods reach it on)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("testbed-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_key, server_cert = _issue(
        ca_key, ca_name, _name("kube-apiserver"), server=True, ips=_SERVER_IPS + extra_ips
    )
    admin_key, admin_cert = _issue(
        ca_key, ca_name, _name("testbed-admin", "system:masters"), server=False
    )
    sa_key = ec.generate_private_key(ec.SECP256R1())
    files = files_in(directory)
    files.ca_cert.write_bytes(_cert_pem(ca_cert))
    files.server_cert.write_bytes(_cert_pem(server_cert))
    files.server_key.write_bytes(_key_pem(server_key))
    files.admin_cert.write_bytes(_cert_pem(admin_cert))
    files.admin_key.write_bytes(_key_pem(admin_key))
    files.sa_key.write_bytes(_key_pem(sa_key))
    files.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    files.ca_key.write_bytes(_key_pem(ca_key))
    for path in (files.server_key, files.admin_key, files.sa_key, files.ca_key):
        path.chmod(0o600)
    return files


def files_in(directory: Path) -> PkiFiles:
    """The file names `generate` writes, for a PKI that already exists."""
    return PkiFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "apiserver.crt",
        server_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        ca_key=directory / "ca.key",
    )
