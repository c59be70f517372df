"""`kube.login`: a kubeconfig's embedded keys never stay on disk, and kopf gets the same login."""

from __future__ import annotations

import base64
import datetime
import os
import tempfile
from pathlib import Path

import kopf
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.config import kube_config

from ansible_operator.kube import login

CA, CERT, KEY = b"-----CA-----\n", b"-----CERT-----\n", b"-----BEGIN PRIVATE KEY-----\nk3y\n"


def _kubeconfig(path: Path, *, server: str = "https://127.0.0.1:6443") -> Path:
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": server, "certificate-authority-data": b64(CA)},
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def test_embedded_certificates_and_key_live_in_memory_only(temp: Path, tmp_path: Path) -> None:
    configuration = login.load(str(_kubeconfig(tmp_path / "kubeconfig")))
    files = (configuration.ssl_ca_cert, configuration.cert_file, configuration.key_file)
    assert all(str(f).startswith("/proc/self/fd/") for f in files), files
    assert [Path(f).read_bytes() for f in files] == [CA, CERT, KEY]  # what TLS opens
    assert list(temp.rglob("*")) == []  # nothing in the temp dir, not even the scratch dir
    assert not any(str(temp) in str(name) for name in kube_config._temp_files.values())


def test_loading_twice_gives_working_files_both_times(temp: Path, tmp_path: Path) -> None:
    path = str(_kubeconfig(tmp_path / "kubeconfig"))
    first, second = login.load(path), login.load(path)
    assert Path(first.key_file).read_bytes() == Path(second.key_file).read_bytes() == KEY
    assert list(temp.rglob("*")) == []


def test_kopf_gets_the_same_login(temp: Path, tmp_path: Path) -> None:
    configuration = login.load(str(_kubeconfig(tmp_path / "kubeconfig")))
    configuration.api_key = {"BearerToken": "Bearer abc"}
    fields = login.connection_fields(configuration)
    assert fields["server"] == "https://127.0.0.1:6443"
    assert (fields["scheme"], fields["token"]) == ("Bearer", "abc")
    assert fields["private_key_path"] == configuration.key_file
    assert fields["insecure"] is False


def test_a_dead_processes_login_directory_is_swept(temp: Path) -> None:
    dead = temp / f"{login.LOGIN_DIR_PREFIX}999999999-abc"
    ours = temp / f"{login.LOGIN_DIR_PREFIX}{os.getppid()}-abc"  # a live process
    other = temp / "unrelated-999999999-abc"
    for directory in (dead, ours, other):
        directory.mkdir()
        (directory / "key").write_bytes(KEY)
    assert login.sweep_stale_dirs(temp, login.LOGIN_DIR_PREFIX) == 1
    assert sorted(p.name for p in temp.iterdir()) == sorted([ours.name, other.name])


def _self_signed_ca() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_a_token_login_keeps_its_ca_in_memory_across_the_librarys_refresh(
    temp: Path, tmp_path: Path
) -> None:
    """With a token, the library's refresh hook runs before every request and copies its
    own (deleted) file paths back; kopf's TLS context must still find the CA."""
    ca = _self_signed_ca()
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "certificate-authority-data": base64.b64encode(ca).decode(),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t0k"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    configuration = login.load(str(path))
    for _ in range(2):  # each request refreshes
        fields = login.connection_fields(configuration)
        assert str(configuration.ssl_ca_cert).startswith("/proc/self/fd/")
        assert fields["ca_path"] == configuration.ssl_ca_cert
        assert Path(fields["ca_path"]).read_bytes() == ca
        assert kopf.ConnectionInfo(**fields).as_ssl_context() is not None
    assert fields["token"] == "t0k"
    assert list(temp.rglob("*")) == []
