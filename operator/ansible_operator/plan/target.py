"""Which custom resource a plan is for, and the watch that serves it.

Where it sits: `plan.command` calls `from_file` (`plan -f cr.yaml`) or
`from_cluster` (`plan KIND NAME`) before anything runs. Bad input raises
`PlanInputError` with one line naming the file or object.

A CR file is checked by the API server itself: it is sent as a server-side
dry run (a create when the CR does not exist, else a replace of the live CR
with the file's spec, labels and annotations), so the role sees the object as
the API server would store it, defaulted and validated, with a uid to own
the objects it would create. Nothing is stored.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.config.watches import Watch
from ansible_operator.errors import NotFound, OperatorError
from ansible_operator.kube.client import Kube, ResourceInfo


class PlanInputError(OperatorError):
    """The plan's input is unusable; the message is one line naming what and why."""


@dataclass(frozen=True, slots=True)
class Target:
    watch: Watch
    resource: ResourceInfo
    obj: dict[str, Any]  # the CR as the run sees it
    exists: bool


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _watch_for(watches: Sequence[Watch], *, api_version: str, kind: str, what: str) -> Watch:
    group, _, version = api_version.rpartition("/")
    for watch in watches:
        if (watch.group, watch.version, watch.kind) == (group, version, kind):
            return watch
    raise PlanInputError(f"{what}: no watch serves {kind} in {api_version}")


def _resource(kube: Kube, watch: Watch, what: str) -> ResourceInfo:
    try:
        return kube.resource(group=watch.group, version=watch.version, kind=watch.kind)
    except OperatorError as err:
        raise PlanInputError(f"{what}: {_one_line(str(err))}") from err


def read_file(path: Path) -> dict[str, Any]:
    """The one CR in a YAML file, or PlanInputError naming the file."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as err:
        raise PlanInputError(f"{path}: cannot read: {err.strerror or err}") from err
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        first = _one_line(str(err).split("\n", 1)[0])
        raise PlanInputError(f"{path}: not YAML: {first}") from err
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise PlanInputError(f"{path}: expected one custom resource (a YAML mapping)")
    obj = docs[0]
    meta = obj.get("metadata")
    for key, value in (("apiVersion", obj.get("apiVersion")), ("kind", obj.get("kind"))):
        if not isinstance(value, str) or not value:
            raise PlanInputError(f"{path}: {key} is missing")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise PlanInputError(f"{path}: metadata.name is missing")
    return obj


def from_file(path: Path, *, watches: Sequence[Watch], kube: Kube, namespace: str | None) -> Target:
    obj = read_file(path)
    watch = _watch_for(watches, api_version=obj["apiVersion"], kind=obj["kind"], what=str(path))
    res = _resource(kube, watch, str(path))
    meta = obj["metadata"]
    ns = str(meta.get("namespace") or namespace or "default") if res.namespaced else ""
    if res.namespaced:
        meta["namespace"] = ns
    live = kube.get_or_none(res, namespace=ns, name=meta["name"])
    try:
        if live is None:
            planned = kube.request(
                "POST", res.path(namespace=ns), query=[("dryRun", "All")], body=obj
            )
        else:
            planned = kube.request(
                "PUT",
                res.path(namespace=ns, name=meta["name"]),
                query=[("dryRun", "All")],
                body=_overlay(live, obj),
            )
    except OperatorError as err:
        raise PlanInputError(f"{path}: the API server rejects it: {_one_line(str(err))}") from err
    return Target(watch=watch, resource=res, obj=dict(planned), exists=live is not None)


def _overlay(live: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The live CR with everything but status and metadata taken from the file,
    and the file's labels and annotations."""
    body = copy.deepcopy(dict(live))
    for key, value in given.items():
        if key not in {"metadata", "status", "apiVersion", "kind"}:
            body[key] = value
    meta = body["metadata"]
    for key in ("labels", "annotations"):
        if key in given["metadata"]:
            meta[key] = given["metadata"][key]
    return body


def from_cluster(
    kind: str, name: str, *, watches: Sequence[Watch], kube: Kube, namespace: str | None
) -> Target:
    wanted = kind.lower()
    found = [w for w in watches if wanted in {w.kind.lower(), f"{w.kind}.{w.group}".lower()}]
    if not found:
        raise PlanInputError(f"{kind} {name}: no watch serves kind {kind}")
    if len(found) > 1:
        raise PlanInputError(f"{kind} {name}: several watches serve {kind}; write KIND.GROUP")
    watch = found[0]
    res = _resource(kube, watch, f"{kind} {name}")
    ns = (namespace or "default") if res.namespaced else ""
    where = f"{ns}/{name}" if ns else name
    try:
        obj = kube.get(res, namespace=ns, name=name)
    except NotFound as err:
        raise PlanInputError(f"{watch.kind} {where}: not found") from err
    except OperatorError as err:
        raise PlanInputError(f"{watch.kind} {where}: {_one_line(str(err))}") from err
    return Target(watch=watch, resource=res, obj=dict(obj), exists=True)


def deleting(target: Target, *, now: datetime.datetime) -> Target:
    """The target as its finalizer run sees it: marked for deletion at `now`."""
    if target.watch.finalizer is None:
        raise PlanInputError(
            f"--delete: the watch of {target.watch.kind} has no finalizer, so deleting runs nothing"
        )
    obj = copy.deepcopy(target.obj)
    meta = obj["metadata"]
    meta.setdefault("deletionTimestamp", now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta["finalizers"] = sorted({*meta.get("finalizers", []), target.watch.finalizer.name})
    return Target(watch=target.watch, resource=target.resource, obj=obj, exists=target.exists)
