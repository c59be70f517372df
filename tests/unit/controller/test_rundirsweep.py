"""`controller.rundirsweep`: at start-up the runner directories of deleted CRs go."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.rundirsweep import remove_gone
from ansible_operator.kube.client import ResourceInfo
from ansible_operator.kube.fakekube import FakeKube
from ansible_operator.runner import privatedir, scratch

RES = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Thing",
    plural="things",
    namespaced=True,
    has_status=True,
)
CLUSTER = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Globe",
    plural="globes",
    namespaced=False,
    has_status=True,
)


def _watch(res: ResourceInfo) -> Watch:
    return Watch(gvk=GVK(res.group, res.version, res.kind), playbook=Path("/p.yml"))


def _dir(root: Path, res: ResourceInfo, namespace: str, name: str, *, age: float = 60) -> Path:
    path = privatedir.cr_dir(
        root=root,
        group=res.group,
        version=res.version,
        kind=res.kind,
        namespace=namespace,
        name=name,
    )
    (path / "env").mkdir(parents=True)
    (path / "env" / "extravars").write_text("{}")
    (path / "artifacts").mkdir()
    _age(path, age)
    return path


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    for each in (path / "env", path / "artifacts", path):
        os.utime(each, (old, old))


def _kube(*objects: tuple[ResourceInfo, str, str]) -> FakeKube:
    kube = FakeKube()
    for res in (RES, CLUSTER):
        kube.serve(res)
    for res, namespace, name in objects:
        body = {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"name": name}}
        kube.create(res, namespace=namespace, body=body)
    return kube


def test_only_directories_of_gone_resources_in_watched_namespaces_go(tmp_path: Path) -> None:
    kube = _kube((RES, "ns1", "kept"), (CLUSTER, "", "world"))
    kept = _dir(tmp_path, RES, "ns1", "kept")
    gone = _dir(tmp_path, RES, "ns1", "gone")
    elsewhere = _dir(tmp_path, RES, "ns9", "gone")  # a namespace this operator does not watch
    fresh = _dir(tmp_path, RES, "ns1", "new", age=-5)  # its CR was created after the list
    world, flat = _dir(tmp_path, CLUSTER, "", "world"), _dir(tmp_path, CLUSTER, "", "flat")
    watches = [_watch(RES), _watch(CLUSTER), _watch(RES)]
    removed = remove_gone(kube, watches, root=tmp_path, namespaces=("ns1",))
    assert removed == 2
    assert [p.exists() for p in (kept, gone, elsewhere, fresh, world, flat)] == [
        True,
        False,
        True,
        True,
        True,
        False,
    ]
    assert sum(1 for call in kube.calls if call.verb == "list_names") == 2  # once per kind


def test_a_directory_a_live_run_holds_is_left(tmp_path: Path) -> None:
    busy = _dir(tmp_path, RES, "ns1", "busy")
    alias = scratch.scratch_dir(busy, "42", root=tmp_path)  # a run of another operator
    try:
        assert remove_gone(_kube(), [_watch(RES)], root=tmp_path, namespaces=()) == 0
        assert busy.exists()
    finally:
        privatedir.finish_run(
            busy, ident="42", max_artifacts=1, root=tmp_path, completed=True, alias=alias
        )
    assert remove_gone(_kube(), [_watch(RES)], root=tmp_path, namespaces=()) == 0  # just ran
    _age(busy, 60)
    assert remove_gone(_kube(), [_watch(RES)], root=tmp_path, namespaces=()) == 1


def test_a_kind_the_server_does_not_serve_is_left_alone(tmp_path: Path) -> None:
    kube = FakeKube()  # no CRD at the moment
    thing = _dir(tmp_path, RES, "ns1", "thing")
    assert remove_gone(kube, [_watch(RES)], root=tmp_path, namespaces=()) == 0
    assert thing.exists()
