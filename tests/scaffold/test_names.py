"""Every name `init` and `create api` take is checked as Kubernetes checks it.

One case per bad input: the command exits 1 with one line that names the
flag, and the directory is exactly as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.scaffold.names import ApiNames, pluralize
from tests.scaffold.conftest import INIT, Cli, snapshot

API = ("create", "api")
GOOD = {"--group": "cache", "--version": "v1alpha1", "--kind": "Memcached"}


def api_args(**override: str) -> tuple[str, ...]:
    flags = {**GOOD, **{f"--{k.replace('_', '-')}": v for k, v in override.items()}}
    return (*API, *(f"{flag}={value}" for flag, value in flags.items()))


BAD_API = [
    # (id, arguments, flag named, words of the message)
    ("group-upper", api_args(group="Cache"), "--group", "DNS-1123 subdomain"),
    ("group-underscore", api_args(group="cache_db"), "--group", "DNS-1123 subdomain"),
    ("group-dash-end", api_args(group="cache-"), "--group", "DNS-1123 subdomain"),
    ("group-empty-part", api_args(group="cache..db"), "--group", "DNS-1123 subdomain"),
    ("group-missing", api_args(group=""), "--group", "must not be empty"),
    ("group-label-64", api_args(group="a" * 64), "--group", "DNS-1123 subdomain"),
    (
        "group-with-domain-254",
        api_args(group=".".join(["a" * 60] * 4)),
        "--group",
        "longer than 253",
    ),
    ("version-no-v", api_args(version="1"), "--version", "not an API version"),
    ("version-upper", api_args(version="V1"), "--version", "not an API version"),
    ("version-zero", api_args(version="v0"), "--version", "not an API version"),
    ("version-alpha-no-number", api_args(version="v1alpha"), "--version", "not an API version"),
    ("version-gamma", api_args(version="v1gamma1"), "--version", "not an API version"),
    ("version-missing", api_args(version=""), "--version", "must not be empty"),
    ("kind-lower", api_args(kind="memcached"), "--kind", "not CamelCase"),
    ("kind-dash", api_args(kind="Mem-cached"), "--kind", "not CamelCase"),
    ("kind-digit-first", api_args(kind="1Memcached"), "--kind", "not CamelCase"),
    ("kind-dot", api_args(kind="Mem.cached"), "--kind", "not CamelCase"),
    ("kind-missing", api_args(kind=""), "--kind", "must not be empty"),
    ("kind-too-long", api_args(kind="M" + "a" * 62), "--kind", "too long"),
    (
        "crd-version-v1beta1",
        (*api_args(), "--crd-version", "v1beta1"),
        "--crd-version",
        "not supported",
    ),
]


@pytest.mark.parametrize(
    ("args", "flag", "words"), [c[1:] for c in BAD_API], ids=[c[0] for c in BAD_API]
)
def test_create_api_refuses_bad_names(
    project: Path, run_cli: Cli, args: tuple[str, ...], flag: str, words: str
) -> None:
    before = snapshot(project)
    result = run_cli(project, *args)
    assert result.code == 1
    assert result.err.count("\n") == 1, result.err
    assert result.err.startswith(f"ansible-operator create api: {flag}"), result.err
    assert words in result.err
    assert result.out == ""
    assert snapshot(project) == before


def init_args(**override: str) -> tuple[str, ...]:
    flags = {"--domain": "example.com", "--project-name": "memcached-operator"}
    flags.update({f"--{k.replace('_', '-')}": v for k, v in override.items()})
    return ("init", *(f"{flag}={value}" for flag, value in flags.items()))


BAD_INIT = [
    ("domain-upper", init_args(domain="Example.com"), "--domain", "DNS-1123 subdomain"),
    ("domain-double-dot", init_args(domain="example..com"), "--domain", "DNS-1123 subdomain"),
    ("domain-dash-start", init_args(domain="-example.com"), "--domain", "DNS-1123 subdomain"),
    ("domain-underscore", init_args(domain="my_domain.com"), "--domain", "DNS-1123 subdomain"),
    ("domain-empty", init_args(domain=""), "--domain", "must not be empty"),
    ("domain-254", init_args(domain=".".join(["a" * 63] * 4)), "--domain", "longer than 253"),
    ("project-name-upper", init_args(project_name="Memcached"), "--project-name", "DNS-1123 label"),
    (
        "project-name-underscore",
        init_args(project_name="my_operator"),
        "--project-name",
        "DNS-1123 label",
    ),
    ("project-name-dot", init_args(project_name="my.operator"), "--project-name", "DNS-1123 label"),
    ("project-name-64", init_args(project_name="a" * 64), "--project-name", "longer than 63"),
    ("project-name-empty", init_args(project_name=""), "--project-name", "must not be empty"),
    (
        "chained-kind-lower",
        (*init_args(), "--group", "cache", "--version", "v1", "--kind", "memcached"),
        "--kind",
        "not CamelCase",
    ),
    (
        "chained-version-missing",
        (*init_args(), "--group", "cache", "--kind", "Memcached"),
        "--version",
        "needed with",
    ),
    (
        "chained-group-missing",
        (*init_args(), "--version", "v1", "--kind", "Memcached"),
        "--group",
        "needed with",
    ),
    ("generate-role-alone", (*init_args(), "--generate-role"), "--generate-role", "need --group"),
]


@pytest.mark.parametrize(
    ("args", "flag", "words"), [c[1:] for c in BAD_INIT], ids=[c[0] for c in BAD_INIT]
)
def test_init_refuses_bad_names(
    tmp_path: Path, run_cli: Cli, args: tuple[str, ...], flag: str, words: str
) -> None:
    result = run_cli(tmp_path, *args)
    assert result.code == 1
    assert result.err.count("\n") == 1, result.err
    assert result.err.startswith(f"ansible-operator init: {flag}"), result.err
    assert words in result.err
    assert list(tmp_path.iterdir()) == []


def test_init_refuses_a_directory_name_that_is_no_project_name(
    tmp_path: Path, run_cli: Cli
) -> None:
    root = tmp_path / "My_Operator"
    root.mkdir()
    result = run_cli(root, "init", "--domain", "example.com")
    assert result.code == 1
    assert result.err.startswith(
        "ansible-operator init: --project-name: not given, and the directory name 'My_Operator'"
    )
    assert list(root.iterdir()) == []


def test_init_takes_the_directory_name_by_default(tmp_path: Path, run_cli: Cli) -> None:
    root = tmp_path / "memcached-operator"
    root.mkdir()
    assert run_cli(root, *INIT[:3]).code == 0
    assert "projectName: memcached-operator" in (root / "PROJECT").read_text()


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Memcached", "memcacheds"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),
        ("Ingress", "ingresses"),
        ("Box", "boxes"),
        ("Batch", "batches"),
        ("Mesh", "meshes"),
        ("Proxy", "proxies"),
    ],
)
def test_plurals(kind: str, plural: str) -> None:
    assert pluralize(kind.lower()) == plural


def test_api_names() -> None:
    names = ApiNames.checked(
        group="cache", version="v1alpha1", kind="Memcached", domain="example.com"
    )
    assert names.full_group == "cache.example.com"
    assert names.api_version == "cache.example.com/v1alpha1"
    assert names.sample_file == "cache_v1alpha1_memcached.yaml"
    assert names.template_values()["object_var"] == "_cache_example_com_memcached"
