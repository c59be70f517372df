"""The journal of a planned run read back as changes: pure functions, no I/O.

Where it sits: `plan.command` calls `analyze(entries, cr=...)` after the run;
`plan.report` renders the resulting `Analysis`.

Per object the run wrote (its writes were all dry runs, see proxy.readonly):
the live object before the first write is compared with the API server's
answer to the last one. `create` (nothing live), `delete` (the last write was a
DELETE), `update` or `unchanged` (equal once the noise is left out: the fields
`managedFields`, `resourceVersion`, `uid`, `generation`, `creationTimestamp`
of metadata, the `kubectl.kubernetes.io/last-applied-configuration`
annotation, and the status of built-in kinds, which their controllers write).
The diff is a unified diff of both as YAML with sorted keys.

Writes to the CR's own `status` (and the results of `k8s_status` in check
mode) form the status the run would leave; Events (`k8s_event` results and
written Event objects) are listed apart; tasks Ansible skipped for want of
check mode are "not evaluated"; failed writes and refused requests are errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ansible_operator.plan.journal import Entry, TaskEntry, WriteEntry, mentions_check_mode

NOISE = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp")
# A copy of the object that `apply: true` keeps in the object: it restates the diff.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_EVENT_KINDS = frozenset({("", "Event"), ("events.k8s.io", "Event")})


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    subresource: str = ""

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.kind} {where}{self.name}{sub} ({self.api_version})"


@dataclass(frozen=True, slots=True)
class ObjectChange:
    action: str  # create, update, delete, unchanged
    ref: ObjectRef
    diff: str


@dataclass(frozen=True, slots=True)
class NotEvaluated:
    task: str
    action: str
    reason: str


@dataclass
class Analysis:
    objects: list[ObjectChange] = field(default_factory=list)
    status_before: dict[str, Any] | None = None
    status_after: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    not_evaluated: list[NotEvaluated] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    requeue_after: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def status_diff(self) -> str:
        if self.status_after is None or self.status_after == (self.status_before or {}):
            return ""
        return unified(self.status_before or {}, self.status_after, what="status")

    @property
    def changed(self) -> bool:
        return bool(self.status_diff) or any(o.action != "unchanged" for o in self.objects)


def is_builtin(api_version: str) -> bool:
    """Kinds Kubernetes itself serves: the core group, dotless groups and *.k8s.io."""
    group = api_version.rpartition("/")[0]
    return not group or "." not in group or group.endswith(".k8s.io")


def without_noise(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `obj` without the fields a plan never shows (module docstring)."""
    clean = dict(obj)
    meta = clean.get("metadata")
    if isinstance(meta, Mapping):
        clean["metadata"] = {k: v for k, v in meta.items() if k not in NOISE}
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
            kept = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if kept:
                clean["metadata"]["annotations"] = kept
            else:
                del clean["metadata"]["annotations"]
    if is_builtin(str(clean.get("apiVersion", ""))):
        clean.pop("status", None)
    return clean


def _yaml(obj: Any) -> list[str]:
    if obj is None:
        return []
    text = yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True)
    return text.splitlines(keepends=True)


def unified(before: Any, after: Any, *, what: str) -> str:
    lines = difflib.unified_diff(
        _yaml(before), _yaml(after), fromfile=f"live/{what}", tofile=f"planned/{what}"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _is_object(value: Any) -> bool:
    """An API object, not a Status (what some deletes answer)."""
    return isinstance(value, Mapping) and value.get("kind") != "Status"


def _ref(entry: WriteEntry) -> ObjectRef | None:
    info = entry.write.info
    obj = entry.after if _is_object(entry.after) else entry.before
    if not isinstance(obj, Mapping) or not info.is_resource:
        return None
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    group_version = "/".join(p for p in (info.group, info.version) if p)
    return ObjectRef(
        api_version=str(obj.get("apiVersion") or group_version),
        kind=str(obj.get("kind") or info.resource),
        namespace=str(meta.get("namespace") or info.namespace),
        name=str(meta.get("name") or info.name),
        subresource=info.subresource,
    )


def _failure(entry: WriteEntry) -> str:
    write = entry.write
    if write.refused:
        return write.refused
    message = entry.after.get("message") if isinstance(entry.after, Mapping) else None
    detail = message or write.response[:300].decode(errors="replace")
    return f"{write.method} {write.info}: HTTP {write.status}: {detail}"


def _object_change(
    ref: ObjectRef, before: dict[str, Any] | None, after: Any, *, deleted: bool
) -> ObjectChange | None:
    if deleted:
        return None if before is None else ObjectChange("delete", ref, "")
    if not isinstance(after, Mapping):
        return None
    planned = without_noise(after)
    if before is None:
        return ObjectChange("create", ref, unified(None, planned, what=ref.name))
    live = without_noise(before)
    if live == planned:
        return ObjectChange("unchanged", ref, "")
    return ObjectChange("update", ref, unified(live, planned, what=ref.name))


def _is_cr_status(ref: ObjectRef, cr: Mapping[str, Any]) -> bool:
    meta = cr.get("metadata") or {}
    return (
        ref.subresource == "status"
        and (ref.api_version, ref.kind) == (cr.get("apiVersion"), cr.get("kind"))
        and ref.name == meta.get("name")
        and ref.namespace == (meta.get("namespace") or "")
    )


def analyze(entries: Sequence[Entry], *, cr: Mapping[str, Any]) -> Analysis:
    """Read the journal of one planned run for the custom resource `cr`."""
    result = Analysis(status_before=dict(cr.get("status") or {}))
    firsts: dict[ObjectRef, dict[str, Any] | None] = {}
    lasts: dict[ObjectRef, tuple[Any, bool]] = {}
    for entry in entries:
        if isinstance(entry, TaskEntry):
            _task(result, entry, cr)
            continue
        if entry.write.refused or not 200 <= entry.write.status < 300:
            result.errors.append(_failure(entry))
            continue
        if entry.write.info.verb == "deletecollection":
            for item in _items(entry.after):
                ref = _ref(WriteEntry(write=entry.write, before=item, after=None))
                if ref is not None:
                    firsts.setdefault(ref, item)
                    lasts[ref] = (None, True)
            continue
        ref = _ref(entry)
        if ref is None:
            continue
        if (ref.api_version.rpartition("/")[0], ref.kind) in _EVENT_KINDS:
            if isinstance(entry.after, Mapping) and entry.write.method != "DELETE":
                _add_event(result, entry.after)
            continue
        if _is_cr_status(ref, cr) and isinstance(entry.after, Mapping):
            result.status_after = dict(entry.after.get("status") or {})
            continue
        firsts.setdefault(ref, entry.before)
        lasts[ref] = (entry.after, entry.write.method == "DELETE" and not ref.subresource)
    for ref, (after, deleted) in lasts.items():
        change = _object_change(ref, firsts[ref], after, deleted=deleted)
        if change is not None:
            result.objects.append(change)
    return result


def _items(listed: Any) -> list[dict[str, Any]]:
    """The objects a deletecollection's answer lists, with their apiVersion and kind."""
    if not isinstance(listed, Mapping) or not isinstance(listed.get("items"), list):
        return []
    kind = str(listed.get("kind") or "").removesuffix("List")
    defaults = {"apiVersion": listed.get("apiVersion"), "kind": kind}
    return [{**defaults, **item} for item in listed["items"] if isinstance(item, Mapping)]


def _same(obj: Mapping[str, Any], cr: Mapping[str, Any]) -> bool:
    """Whether `obj` is the custom resource `cr` (k8s_status may address another)."""
    meta, cr_meta = obj.get("metadata") or {}, cr.get("metadata") or {}
    return (
        obj.get("kind") == cr.get("kind")
        and meta.get("name") == cr_meta.get("name")
        and (meta.get("namespace") or "") == (cr_meta.get("namespace") or "")
    )


def _add_event(result: Analysis, obj: Mapping[str, Any]) -> None:
    """Note an Event the run would write, once per name (a k8s_event task forced out
    of check mode is both a dry-run write and a task result)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    event = {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "type": str(obj.get("type") or "Normal"),
        "reason": str(obj.get("reason") or ""),
        "message": str(obj.get("message") or obj.get("note") or ""),
    }
    for index, seen in enumerate(result.events):
        if (seen["namespace"], seen["name"]) == (event["namespace"], event["name"]):
            result.events[index] = event
            return
    result.events.append(event)


def _task(result: Analysis, entry: TaskEntry, cr: Mapping[str, Any]) -> None:
    res = entry.result
    short = entry.action.rpartition(".")[2]
    if mentions_check_mode(res):
        reason = str(res.get("msg"))
        result.not_evaluated.append(NotEvaluated(entry.task, entry.action, reason))
        return
    if entry.event == "runner_on_skipped":
        return
    if short == "k8s_status":
        obj = res.get("result")
        if isinstance(obj, Mapping) and isinstance(obj.get("status"), Mapping) and _same(obj, cr):
            result.status_after = dict(obj["status"])
    elif short == "k8s_event" and res.get("changed"):
        obj = res.get("result")
        if isinstance(obj, Mapping):
            _add_event(result, obj)
    elif short == "requeue_after" and res.get("period") is not None:
        result.requeue_after = str(res["period"])
    elif short == "osdk_metric" and isinstance(res.get("request"), Mapping):
        result.metrics.append(dict(res["request"]))
