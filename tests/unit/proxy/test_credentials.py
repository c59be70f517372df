"""Per-run tokens and the run's kubeconfig."""

from __future__ import annotations

import base64
import stat
import threading
from pathlib import Path

import yaml
from kubernetes import client, config

from ansible_operator.proxy.credentials import Owner, RunCredentials, write_kubeconfig

OWNER = Owner(
    api_version="cache.example.com/v1alpha1",
    kind="Memcached",
    name="mc",
    namespace="ns1",
    uid="uid-1",
    controller="memcached-v1alpha1-controller",
)


def test_issue_lookup_revoke() -> None:
    creds = RunCredentials()
    token = creds.issue(OWNER)
    assert creds.lookup(token.token) == OWNER
    token.revoke()
    assert creds.lookup(token.token) is None
    token.revoke()  # twice is harmless
    assert len(creds) == 0


def test_context_manager_revokes_even_on_error() -> None:
    creds = RunCredentials()
    try:
        with creds.issue(OWNER) as token:
            assert creds.lookup(token.token) == OWNER
            raise RuntimeError("the run failed")
    except RuntimeError:
        pass
    assert creds.lookup(token.token) is None


def test_tokens_are_256_random_bits_and_distinct() -> None:
    creds = RunCredentials()
    tokens = {creds.issue(OWNER).token for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        assert len(raw) == 32


def test_unknown_empty_and_similar_tokens_are_refused() -> None:
    creds = RunCredentials()
    token = creds.issue(OWNER).token
    assert creds.lookup("") is None
    assert creds.lookup("nope") is None
    assert creds.lookup(token[:-1]) is None
    assert creds.lookup(token + "x") is None


def test_each_token_names_its_own_owner_under_concurrency() -> None:
    creds = RunCredentials()
    mismatches: list[str] = []

    def run(i: int) -> None:
        owner = Owner("v1", "ConfigMap", f"cm{i}", "ns", f"uid-{i}", "c")
        for _ in range(200):
            with creds.issue(owner) as token:
                if creds.lookup(token.token) != owner:
                    mismatches.append(owner.name)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []
    assert len(creds) == 0


def test_repr_does_not_leak_the_secret() -> None:
    token = RunCredentials().issue(OWNER)
    assert token.token not in repr(token)


def test_kubeconfig_is_private_and_loadable(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("old, world-readable")
    path.chmod(0o644)
    write_kubeconfig(path, server="http://127.0.0.1:12345", token="secret-token", namespace="ns1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    document = yaml.safe_load(path.read_text())
    context = document["contexts"][0]["context"]
    assert context["namespace"] == "ns1"
    # The kubernetes client (what kubernetes.core uses) reads it as meant.
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == "http://127.0.0.1:12345"
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer secret-token"
    _, active = config.list_kube_config_contexts(config_file=str(path))
    assert active["context"]["namespace"] == "ns1"


def test_kubeconfig_of_a_cluster_scoped_owner_has_no_namespace(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", server="http://127.0.0.1:1", token="t", namespace="")
    context = yaml.safe_load(path.read_text())["contexts"][0]["context"]
    assert "namespace" not in context
