"""`kube.upstream.make_pool`: the operator reaches the API server through the proxy the
kubernetes client would choose (kubeconfig's proxy-url, else the environment's, never
for a server NO_PROXY names)."""

from __future__ import annotations

import pytest
import urllib3

from ansible_operator.kube.login import StaticLogin
from ansible_operator.kube.upstream import make_pool, proxy_for

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_the_environments_proxy_is_used_by_the_servers_scheme(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy:3128")
    assert proxy_for("https://10.0.0.1:6443", None) == "http://secure-proxy:3128"
    assert proxy_for("http://10.0.0.1:8080", None) == "http://plain-proxy:3128"
    pool = make_pool(StaticLogin(host="https://10.0.0.1:6443"))
    assert isinstance(pool, urllib3.ProxyManager)
    assert pool.proxy is not None
    assert pool.proxy.host == "secure-proxy"


def test_the_kubeconfigs_proxy_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    assert proxy_for("https://api.example:6443", "http://own:8080") == "http://own:8080"


@pytest.mark.parametrize(
    ("no_proxy", "server"),
    [
        ("10.96.0.0/12", "https://10.96.0.1:443"),  # the cluster's service range
        ("example.com", "https://api.example.com:6443"),  # a domain covers its hosts
        (".example.com", "https://api.example.com:6443"),
        ("other, api.example.com:6443", "https://api.example.com:6443"),
        ("*", "https://anything:6443"),
        ("::1", "https://[::1]:6443"),
    ],
)
def test_no_proxy_names_the_server(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, server: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert proxy_for(server, "http://own:8080") is None
    assert type(make_pool(StaticLogin(host=server))) is urllib3.PoolManager


@pytest.mark.parametrize(
    ("no_proxy", "server"),
    [
        ("10.96.0.0/12", "https://10.112.0.1:443"),
        ("example.com", "https://api.example.org:6443"),
        ("ample.com", "https://api.example.com:6443"),  # a suffix, not a domain
    ],
)
def test_no_proxy_leaves_other_servers_to_the_proxy(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, server: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert proxy_for(server, None) == "http://env-proxy:3128"


def test_without_any_proxy_the_pool_is_direct() -> None:
    assert proxy_for("https://10.0.0.1:6443", None) is None
    assert type(make_pool(StaticLogin(host="https://10.0.0.1:6443"))) is urllib3.PoolManager
