"""`kube.login`, `kube.kubeconfig`, `kube.librarylogin`: a kubeconfig read as the
kubernetes client reads it, its embedded keys never on disk, and kopf gets the same login."""

from __future__ import annotations

import base64
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.config import kube_config

from ansible_operator.errors import ConfigError
from ansible_operator.kube import kubeconfig, login
from ansible_operator.kube.librarylogin import LibraryLogin

CA, CERT, KEY = b"-----CA-----\n", b"-----CERT-----\n", b"-----BEGIN PRIVATE KEY-----\nk3y\n"
SERVER = "https://127.0.0.1:6443"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path, *, user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": cluster
                        or {"server": SERVER, "certificate-authority-data": b64(CA)},
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": user
                        if user is not None
                        else {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
                    }
                ],
                "contexts": [
                    {"name": "other", "context": {"cluster": "missing", "user": "u"}},
                    {"name": "x", "context": {"cluster": "c", "user": "u"}},
                ],
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
    found = kubeconfig.from_kubeconfig(str(write_kubeconfig(tmp_path / "kubeconfig")))
    files = (found.ssl_ca_cert, found.cert_file, found.key_file)
    assert all(str(f).startswith("/proc/self/fd/") for f in files), files
    assert [Path(str(f)).read_bytes() for f in files] == [CA, CERT, KEY]  # what TLS opens
    assert list(temp.rglob("*")) == []  # nothing in the temp dir, not even a scratch dir
    assert found.host == SERVER
    assert found.verify_ssl
    assert found.authorization() is None  # the client certificate is the login


def test_loading_twice_gives_working_files_both_times(temp: Path, tmp_path: Path) -> None:
    path = str(write_kubeconfig(tmp_path / "kubeconfig"))
    first, second = kubeconfig.from_kubeconfig(path), kubeconfig.from_kubeconfig(path)
    assert Path(str(first.key_file)).read_bytes() == Path(str(second.key_file)).read_bytes() == KEY
    assert list(temp.rglob("*")) == []


def test_files_are_found_from_the_kubeconfigs_directory(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    for name, data in (("ca.crt", CA), ("user.crt", CERT), ("user.key", KEY)):
        (tmp_path / "pki" / name).write_bytes(data)
    cluster = {"server": SERVER + "/", "certificate-authority": "pki/ca.crt"}
    user = {"client-certificate": "pki/user.crt", "client-key": str(tmp_path / "pki/user.key")}
    found = kubeconfig.from_kubeconfig(
        str(write_kubeconfig(tmp_path / "kubeconfig", cluster=cluster, user=user))
    )
    assert found.host == SERVER  # without the trailing slash
    assert found.ssl_ca_cert == str(tmp_path / "pki" / "ca.crt")
    assert found.cert_file == str(tmp_path / "pki" / "user.crt")
    assert found.key_file == str(tmp_path / "pki" / "user.key")


@pytest.mark.parametrize(
    ("user", "header"),
    [
        ({"token": "t0k", "username": "a", "password": "b"}, "Bearer t0k"),
        ({"username": "admin", "password": "secret"}, f"Basic {b64(b'admin:secret')}"),
        ({}, None),
    ],
)
def test_a_users_token_or_password(tmp_path: Path, user: dict[str, Any], header: str) -> None:
    found = kubeconfig.from_kubeconfig(str(write_kubeconfig(tmp_path / "k", user=user)))
    assert found.authorization() == header


def test_cluster_settings_and_a_plain_http_server(tmp_path: Path) -> None:
    cluster = {
        "server": "http://127.0.0.1:8080",
        "certificate-authority": "missing.crt",  # ignored without https, as the client does
        "insecure-skip-tls-verify": True,
        "tls-server-name": "api.example",
        "proxy-url": "http://proxy:3128",
    }
    found = kubeconfig.from_kubeconfig(str(write_kubeconfig(tmp_path / "k", cluster=cluster)))
    assert (found.ssl_ca_cert, found.verify_ssl) == (None, False)
    assert (found.tls_server_name, found.proxy) == ("api.example", "http://proxy:3128")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no configuration found"),
        ("current-context: nowhere\ncontexts: []\n", "no context named 'nowhere'"),
        ("[: not yaml", "kubeconfig"),
    ],
)
def test_a_bad_kubeconfig_is_a_config_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        kubeconfig.from_kubeconfig(str(path))


def test_a_missing_kubeconfig_or_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        kubeconfig.from_kubeconfig(str(tmp_path / "absent"))
    cluster = {"server": SERVER, "certificate-authority": "absent.crt"}
    with pytest.raises(ConfigError, match="file does not exist"):
        kubeconfig.from_kubeconfig(str(write_kubeconfig(tmp_path / "k", cluster=cluster)))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_file_is_read_again_as_it_rotates(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    clock = Clock()
    source = login.TokenFile(str(token), clock=clock)
    token.write_text("two")
    assert source.header() == "Bearer one"  # read a minute at most
    clock.now = login.TOKEN_REREAD_SECONDS
    assert source.header() == "Bearer two"
    token.unlink()
    clock.now *= 2
    assert source.header() == "Bearer two"  # a failed re-read keeps the last token


def test_a_kubeconfigs_token_file_is_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0k")
    found = kubeconfig.from_kubeconfig(
        str(write_kubeconfig(tmp_path / "k", user={"tokenFile": "token"}))
    )
    assert found.authorization() == "Bearer t0k"
    (tmp_path / "token").write_text("")
    with pytest.raises(ConfigError, match="empty"):
        kubeconfig.from_kubeconfig(str(tmp_path / "k"))


def test_in_cluster_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(CA)
    found = kubeconfig.in_cluster()
    assert found.host == "https://[fd00::1]:443"
    assert found.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert found.authorization() == "Bearer sa-token"
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST/PORT"):
        kubeconfig.in_cluster()


def test_kopf_gets_the_same_login(temp: Path, tmp_path: Path) -> None:
    user = {"token": "abc", "client-key-data": b64(KEY), "client-certificate-data": b64(CERT)}
    found = kubeconfig.from_kubeconfig(str(write_kubeconfig(tmp_path / "k", user=user)))
    fields = login.connection_fields(found)
    assert fields["server"] == SERVER
    assert (fields["scheme"], fields["token"]) == ("Bearer", "abc")
    assert fields["private_key_path"] == found.key_file
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


EXEC_PLUGIN = json.dumps(
    {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
)


def test_an_exec_plugin_is_left_to_the_library_with_its_ca_in_memory(
    temp: Path, tmp_path: Path
) -> None:
    """The library's refresh hook runs before every request and copies its own
    (deleted) file paths back; kopf's TLS context must still find the CA."""
    ca = _self_signed_ca()
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", f"print({EXEC_PLUGIN!r})"],
        }
    }
    cluster = {"server": SERVER, "certificate-authority-data": b64(ca)}
    found = kubeconfig.from_kubeconfig(
        str(write_kubeconfig(tmp_path / "kubeconfig", user=user, cluster=cluster))
    )
    assert isinstance(found, LibraryLogin)
    for _ in range(2):  # each request refreshes
        fields = login.connection_fields(found)
        assert str(found.ssl_ca_cert).startswith("/proc/self/fd/")
        assert fields["ca_path"] == found.ssl_ca_cert
        assert Path(fields["ca_path"]).read_bytes() == ca
        assert kopf.ConnectionInfo(**fields).as_ssl_context() is not None
    assert fields["token"] == "from-exec"
    assert list(temp.rglob("*")) == []
    assert not any(str(temp) in str(name) for name in kube_config._temp_files.values())
