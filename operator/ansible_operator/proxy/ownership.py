"""Ownership rules of the API proxy, as pure functions (docs/proxy.md).

Called by `proxy.server` for every write a run sends: `decode_body` reads the
object a body carries, `parse_request` tells what the URL addresses,
`write_kind` whether the write can create the object, `decide` whether a
created object gets an ownerReference or the two
`operator-sdk/primary-resource*` annotations, `with_ownership` puts it into a
request body and `followup_patch` builds the JSON patch that adds it after a
write that turned out to create. The resulting `Touch` is handed to
`controller.dependents` to watch the kind.

The rule: a CR becomes the owner only of objects its run *creates*. Owning an
object makes the garbage collector delete it with the CR, so adopting an
object that existed before the run (a shared ConfigMap a role patches, a
Namespace a cluster-scoped CR labels) would delete data nobody asked to
delete. An owner the object already records for this CR is kept: a replace
(PUT) or server-side apply body that omits it would otherwise drop it.

Decision table (owner = the run's custom resource, dependent = the object):

    owner cluster-scoped                                  -> ownerReference
    dependent cluster-scoped, owner namespaced            -> annotations
    both namespaced, same namespace                       -> ownerReference
    both namespaced, different namespaces                 -> annotations

The dependent's namespace is the URL's when it has one, else the body's. The
ownerReference is {apiVersion, kind, name, uid} without controller or
blockOwnerDeletion, as the Go operator writes it, and is never added twice.

`owner_links` reads the same records back from a dependent, for the
dependent watches' event handlers (which primary CRs to enqueue).
"""

from __future__ import annotations

import enum
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ansible_operator.config.watches import Watch
from ansible_operator.kube import deepjson
from ansible_operator.proxy.credentials import Owner

OWNER_ANNOTATION = "operator-sdk/primary-resource"
OWNER_TYPE_ANNOTATION = "operator-sdk/primary-resource-type"

APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"

# Subresources of a Namespace that the API server addresses as
# /api/v1/namespaces/<name>/<subresource> (apiserver RequestInfoFactory).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request path addresses, like the API server's RequestInfo."""

    is_resource: bool
    verb: str  # get list watch create update patch delete deletecollection, or the HTTP verb
    group: str = ""
    version: str = ""
    namespace: str = ""  # "" for cluster-scoped requests and all-namespace lists
    resource: str = ""  # the plural, e.g. "configmaps"
    name: str = ""
    subresource: str = ""  # "status", "scale", "exec", "log", "proxy/..."
    dry_run: bool = False

    def __str__(self) -> str:
        if not self.is_resource:
            return self.verb
        where = f" in {self.namespace}" if self.namespace else ""
        sub = f"/{self.subresource}" if self.subresource else ""
        group = f".{self.group}" if self.group else ""
        return f"{self.verb} {self.resource}{group}/{self.name}{sub}{where}"


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _verb(method: str, *, name: str, watch: bool) -> str:
    if method in {"GET", "HEAD"}:
        if watch:
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return _VERBS.get(method, method.lower())


def parse_request(method: str, target: str) -> RequestInfo:
    """Parse an HTTP request target ("/api/v1/namespaces/x/pods?watch=1")."""
    split = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
    parts = [urllib.parse.unquote(p) for p in split.path.strip("/").split("/") if p]
    method = method.upper()
    watch = query.get("watch", [""])[-1].lower() in {"1", "true"}
    dry_run = "dryRun" in query
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        # /version, /api, /apis/<group>, /openapi/..., /healthz: not resources.
        return RequestInfo(is_resource=False, verb=method.lower())
    if rest[0] == "watch":  # the deprecated /watch/ path prefix
        watch, rest = True, rest[1:]
        if not rest:
            return RequestInfo(is_resource=False, verb=method.lower())
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = "/".join(rest[2:])
    return RequestInfo(
        is_resource=True,
        verb=_verb(method, name=name, watch=watch),
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        name=name,
        subresource=subresource,
        dry_run=dry_run,
    )


class Mode(enum.Enum):
    """How a dependent records its owner."""

    OWNER_REFERENCE = "ownerReference"
    ANNOTATIONS = "annotations"


def decide(owner: Owner, *, dependent_namespaced: bool, dependent_namespace: str) -> Mode:
    """The decision table of the module docstring."""
    if owner.cluster_scoped:
        return Mode.OWNER_REFERENCE
    if not dependent_namespaced:
        return Mode.ANNOTATIONS
    if dependent_namespace == owner.namespace:
        return Mode.OWNER_REFERENCE
    return Mode.ANNOTATIONS


def dependent_namespace(info: RequestInfo, body: Any, *, namespaced: bool) -> str:
    """The dependent's namespace: the URL's if set, else the body's; "" if cluster-scoped."""
    if not namespaced:
        return ""
    if info.namespace:
        return info.namespace
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""


def owner_reference(owner: Owner) -> dict[str, str]:
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
    }


def owner_type(owner: Owner) -> str:
    """`<Kind>.<group>`, or just `<Kind>` for the core group."""
    return f"{owner.kind}.{owner.group}" if owner.group else owner.kind


def owner_annotations(owner: Owner) -> dict[str, str]:
    return {
        OWNER_ANNOTATION: f"{owner.namespace}/{owner.name}",
        OWNER_TYPE_ANNOTATION: owner_type(owner),
    }


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def has_ownership(obj: Mapping[str, Any], owner: Owner, mode: Mode) -> bool:
    """True if `obj` already records `owner` the way `mode` says."""
    meta = _metadata(obj)
    if mode is Mode.OWNER_REFERENCE:
        refs = meta.get("ownerReferences") or []
        return any(isinstance(r, Mapping) and r.get("uid") == owner.uid for r in refs)
    annotations = meta.get("annotations") or {}
    return all(annotations.get(k) == v for k, v in owner_annotations(owner).items())


def with_ownership(obj: Mapping[str, Any], owner: Owner, mode: Mode) -> dict[str, Any]:
    """A copy of the object (a POST/PUT/apply body) that records `owner`.

    Only the object and its metadata are copied (the lists and maps changed
    here are new ones): the rest is shared with `obj`, which may be nested
    deeper than a recursive copy can go.
    """
    result = dict(obj)
    if has_ownership(result, owner, mode):
        return result
    meta = result.get("metadata")
    meta = result["metadata"] = dict(meta) if isinstance(meta, Mapping) else {}
    if mode is Mode.OWNER_REFERENCE:
        refs = meta.get("ownerReferences")
        meta["ownerReferences"] = [
            *(refs if isinstance(refs, list) else []),
            owner_reference(owner),
        ]
    else:
        annotations = meta.get("annotations")
        meta["annotations"] = {
            **(annotations if isinstance(annotations, dict) else {}),
            **owner_annotations(owner),
        }
    return result


def _pointer(token: str) -> str:
    # RFC 6901: "~" and "/" in a key are escaped as "~0" and "~1".
    return token.replace("~", "~0").replace("/", "~1")


def followup_patch(obj: Mapping[str, Any], owner: Owner, mode: Mode) -> list[dict[str, Any]] | None:
    """The JSON patch that adds `owner` to the stored object `obj`; None if it has it already.

    It starts with a `test` of metadata.resourceVersion, so it applies only to
    the very version it was computed from: a concurrent writer makes it fail
    instead of being overwritten.
    """
    if has_ownership(obj, owner, mode):
        return None
    meta = _metadata(obj)
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}
    ]
    if mode is Mode.OWNER_REFERENCE:
        if meta.get("ownerReferences"):
            ops.append(
                {
                    "op": "add",
                    "path": "/metadata/ownerReferences/-",
                    "value": owner_reference(owner),
                }
            )
        else:
            ops.append(
                {
                    "op": "add",
                    "path": "/metadata/ownerReferences",
                    "value": [owner_reference(owner)],
                }
            )
        return ops
    if not meta.get("annotations"):
        ops.append(
            {"op": "add", "path": "/metadata/annotations", "value": owner_annotations(owner)}
        )
        return ops
    for key, value in owner_annotations(owner).items():
        # "add" on an object member replaces an existing value (RFC 6902 §4.1).
        ops.append({"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value})
    return ops


class WriteKind(enum.Enum):
    """Whether a write can create its object, which decides how ownership is added."""

    CREATE = "create"  # POST: always creates; the ownership goes into the body
    # PUT and server-side apply create the object when it is missing and update
    # it otherwise: the body gets the ownership only if the object is missing
    # or records this owner already.
    UPSERT = "upsert"
    # Merge, strategic-merge and JSON patches never create: no ownership, but
    # the kind is still watched.
    PATCH = "patch"
    NONE = "none"  # not an object write (subresources, deletes, reads)


def write_kind(method: str, info: RequestInfo, content_type: str) -> WriteKind:
    """Which ownership path a request takes; never one for subresources."""
    if not info.is_resource or info.subresource:
        return WriteKind.NONE
    if info.verb == "create" and not info.name:
        return WriteKind.CREATE
    if info.verb == "update" and info.name:
        return WriteKind.UPSERT
    if info.verb == "patch" and info.name:
        media = content_type.split(";", maxsplit=1)[0].strip().lower()
        return WriteKind.UPSERT if media == APPLY_PATCH else WriteKind.PATCH
    return WriteKind.NONE


@dataclass(frozen=True, slots=True)
class Touch:
    """One successful write of a dependent by a run: what `controller.dependents` watches."""

    group: str
    version: str
    kind: str
    plural: str
    namespace: str  # "" for cluster-scoped dependents
    name: str
    cluster_scoped: bool
    by_owner_reference: bool  # False: owned through the primary-resource annotations

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        api = f"{self.group}/{self.version}" if self.group else self.version
        return f"{api} {self.kind} {self.name}{where}"


# -- reading ownership back (controller.dependents) --------------------------


@dataclass(frozen=True, slots=True)
class OwnerLink:
    """One owner recorded on a dependent, before the watch configuration filters it."""

    controller: str
    by_owner_reference: bool
    namespace: str  # ownerReference: the dependent's; annotation: the annotated one
    name: str


@dataclass(frozen=True)
class PrimaryIndex:
    """How to recognise a primary kind on a dependent."""

    by_group_kind: Mapping[tuple[str, str], str]  # (group, kind) -> controller
    by_type: Mapping[str, str]  # "Kind.group" / "Kind" -> controller

    @classmethod
    def of(cls, primaries: Mapping[str, Watch]) -> PrimaryIndex:
        gk = {(w.gvk.group, w.gvk.kind): c for c, w in primaries.items()}
        types = {(f"{k}.{g}" if g else k): c for (g, k), c in gk.items()}
        return cls(by_group_kind=gk, by_type=types)


def owner_links(obj: Mapping[str, Any], index: PrimaryIndex) -> frozenset[OwnerLink]:
    """Every primary recorded on `obj`: matching ownerReferences and the annotations."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = str(meta.get("namespace") or "")
    links: set[OwnerLink] = set()
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, Mapping):
            continue
        # Any version of the primary's group and kind, controller or not.
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        controller = index.by_group_kind.get((group, str(ref.get("kind") or "")))
        if controller and ref.get("name"):
            links.add(OwnerLink(controller, True, namespace, str(ref["name"])))
    annotations = meta.get("annotations") or {}
    controller = index.by_type.get(str(annotations.get(OWNER_TYPE_ANNOTATION) or ""))
    primary = str(annotations.get(OWNER_ANNOTATION) or "").strip()
    if controller and primary:
        owner_ns, sep, name = primary.partition("/")
        if not sep:
            owner_ns, name = "", primary
        if name:
            links.add(OwnerLink(controller, False, owner_ns, name))
    return frozenset(links)


def decode_body(body: bytes, content_type: str) -> dict[str, Any] | None:
    """The object in a POST/PUT/apply body, or None if it is not JSON/YAML of an object."""
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media not in {"application/json", APPLY_PATCH, "application/yaml", ""}:
        return None  # e.g. protobuf: forwarded untouched
    try:
        obj = deepjson.loads(body)
    except ValueError:
        if media == "application/json":
            return None
        try:
            obj = yaml.safe_load(body)
        except yaml.YAMLError:
            return None
    return obj if isinstance(obj, dict) else None
