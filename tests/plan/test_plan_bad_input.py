"""Bad input to `ansible-operator plan`: one line naming the file or object, exit 1 (testbed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plan.conftest import GROUP, VERSION, PlanCli

pytestmark = pytest.mark.cluster


def _not_yaml(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "broken.yaml"
    path.write_text("kind: [unclosed\n  name: x\n")
    return ["-f", str(path)]


def _unserved_kind(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "other.yaml"
    path.write_text(
        f"apiVersion: {GROUP}/{VERSION}\nkind: Other\nmetadata:\n  name: o\n  namespace: {namespace}\n"
    )
    return ["-f", str(path)]


def _missing_cr(tmp: Path, namespace: str) -> list[str]:
    return ["Scaler", "nobody", "-n", namespace]


def _unknown_kind(tmp: Path, namespace: str) -> list[str]:
    return ["Gizmo", "g", "-n", namespace]


def _missing_file(tmp: Path, namespace: str) -> list[str]:
    return ["-f", str(tmp / "absent.yaml")]


def _invalid_spec(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "invalid.yaml"
    path.write_text(
        f"apiVersion: {GROUP}/{VERSION}\nkind: Scaler\nmetadata:\n  name: s\n"
        f"  namespace: {namespace}\nspec:\n  size: -1\n"
    )
    return ["-f", str(path)]


def _delete_without_finalizer(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "planned.yaml"
    path.write_text(
        f"apiVersion: {GROUP}/{VERSION}\nkind: Planned\nmetadata:\n  name: p\n"
        f"  namespace: {namespace}\nspec:\n  size: 1\n"
    )
    return ["-f", str(path), "--delete"]


def _several_documents(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "two.yaml"
    path.write_text("a: 1\n---\nb: 2\n")
    return ["-f", str(path)]


def _no_name(tmp: Path, namespace: str) -> list[str]:
    path = tmp / "noname.yaml"
    path.write_text(f"apiVersion: {GROUP}/{VERSION}\nkind: Scaler\nmetadata: {{}}\n")
    return ["-f", str(path)]


def _both(tmp: Path, namespace: str) -> list[str]:
    return ["Scaler", "s", "-f", str(tmp / "x.yaml")]


@pytest.mark.parametrize(
    ("make_args", "expected"),
    [
        (_not_yaml, "broken.yaml: not YAML: "),
        (_unserved_kind, f"other.yaml: no watch serves Other in {GROUP}/{VERSION}"),
        (_missing_cr, "Scaler {namespace}/nobody: not found"),
        (_unknown_kind, "Gizmo g: no watch serves kind Gizmo"),
        (_missing_file, "absent.yaml: cannot read: No such file or directory"),
        (_invalid_spec, "invalid.yaml: the API server rejects it: "),
        (_both, "give either -f FILE or KIND NAME, not both"),
        (_delete_without_finalizer, "--delete: the watch of Planned has no finalizer"),
        (_several_documents, "two.yaml: expected one custom resource"),
        (_no_name, "noname.yaml: metadata.name is missing"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    make_args: Callable[[Path, str], list[str]],
    expected: str,
    namespace: str,
    plan_cli: PlanCli,
    tmp_path: Path,
) -> None:
    done = plan_cli(*make_args(tmp_path, namespace))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ansible-operator plan: ")
    assert expected.format(namespace=namespace) in lines[0]


def test_a_request_that_cannot_be_dry_run_fails_the_plan(
    api_client: object, namespace: str, plan_cli: PlanCli, tmp_path: Path
) -> None:
    path = tmp_path / "prober.yaml"
    path.write_text(
        f"apiVersion: {GROUP}/{VERSION}\nkind: Prober\nmetadata:\n  name: p\n"
        f"  namespace: {namespace}\nspec:\n  pod: somepod\n"
    )
    done = plan_cli("-f", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exec requests cannot be dry-run" in done.stdout
    assert "Requests that failed or were refused:" in done.stdout
