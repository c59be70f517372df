"""The benchmark's own control plane, its API request counters, and CR helpers.

Used by `bench.run` and the scenarios. `BenchCluster` starts a dedicated testbed
instance (its own state dir under /tmp, never the shared `.testbed/`), installs
bench/project's CRDs and stops everything on exit. `ApiCounter` reads the API
server's own `apiserver_request_total` so requests can be counted per operator
run. `CrWatch` follows the custom resources of one kind in one namespace
through a single watch, so the benchmark learns when each becomes
`Successful=True` without polling (polling would add requests of its own).
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch

from testbed import ControlPlane, Layout
from testbed.layout import default_cache_dir

PROJECT = Path(__file__).resolve().parent / "project"
GROUP, VERSION = "bench.example.com", "v1alpha1"
KINDS = {"BenchOne": "benchones", "BenchFive": "benchfives"}

# -- API request counting ------------------------------------------------------------

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

#: Key of a request counter: (verb, group, resource, subresource).
RequestKey = tuple[str, str, str, str]


def parse_request_totals(text: str) -> Counter[RequestKey]:
    """`apiserver_request_total` of a /metrics page, summed over codes and versions."""
    totals: Counter[RequestKey] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        key = (
            labels.get("verb", ""),
            labels.get("group", ""),
            labels.get("resource", ""),
            labels.get("subresource", ""),
        )
        totals[key] += int(float(match["value"]))
    return totals


def is_probe(key: RequestKey) -> bool:
    """Health and metrics endpoints (`/readyz`, `/metrics`, ...): nobody's workload."""
    return key[2] == "" and key[3].startswith("/")


def key_label(key: RequestKey) -> str:
    verb, group, resource, sub = key
    if not resource:
        return f"{verb} /{sub}"
    name = f"{resource}.{group}" if group else resource
    return f"{verb} {name}/{sub}" if sub else f"{verb} {name}"


@dataclass
class RequestWindow:
    """Requests the API server served between two readings, minus known other traffic."""

    seconds: float
    raw: Counter[RequestKey]
    net: dict[RequestKey, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.net.values())

    @property
    def requests(self) -> float:
        """Without WATCH: a watch is counted when it ends, and the control plane's
        informers end theirs every few minutes, which is noise, not work per reconcile."""
        return sum(v for k, v in self.net.items() if k[0] != "WATCH")

    def top(self, count: int = 12) -> dict[str, float]:
        ranked = sorted(self.net.items(), key=lambda kv: -kv[1])[:count]
        return {key_label(k): round(v, 1) for k, v in ranked if v >= 0.5}


class ApiCounter:
    """Reads `apiserver_request_total`; subtracts the cluster's own background traffic.

    The background (kube-controller-manager, kwok's node heartbeats, the API
    server's own leases) is measured per request key over a quiet window with no
    operator running (`measure_background`) and subtracted in proportion to each
    window's length. Requests the benchmark itself makes (creating CRs, its one
    watch) are counted by the caller and subtracted too. Probe endpoints are ignored.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.background: dict[RequestKey, float] = {}  # requests per second

    def read(self) -> Counter[RequestKey]:
        resp = self.api.call_api("GET", f"{self.api.configuration.host}/metrics")
        if resp.status != 200:
            raise RuntimeError(f"GET /metrics of the bench API server: HTTP {resp.status}")
        return parse_request_totals(resp.read().decode())

    def measure_background(self, seconds: float) -> None:
        before, began = self.read(), time.monotonic()
        time.sleep(seconds)
        after, took = self.read(), time.monotonic() - began
        self.background = {
            k: (after[k] - before.get(k, 0)) / took
            for k in after
            if after[k] > before.get(k, 0) and not is_probe(k)
        }

    def window(
        self,
        before: Counter[RequestKey],
        after: Counter[RequestKey],
        seconds: float,
        own: Counter[RequestKey] | None = None,
    ) -> RequestWindow:
        raw: Counter[RequestKey] = Counter()
        for key in set(before) | set(after):
            delta = after.get(key, 0) - before.get(key, 0)
            if delta > 0 and not is_probe(key):
                raw[key] = delta
        own = own or Counter()
        net = {}
        for key, count in raw.items():
            value = count - self.background.get(key, 0.0) * seconds - own[key]
            if value > 0:
                net[key] = value
        return RequestWindow(seconds=seconds, raw=raw, net=net)


# -- watching CRs --------------------------------------------------------------------


def _condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def success_marker(obj: dict[str, Any]) -> str | None:
    """A marker of the latest successful run, or None while the CR is not `Successful=True`.

    Both operators put the recap's creation time (`ansibleResult.completion`) on the
    `Running` condition when a run succeeds, so a new marker means a new run finished.
    """
    ok = _condition(obj, "Successful")
    if not ok or ok.get("status") != "True":
        return None
    running = _condition(obj, "Running") or {}
    result = running.get("ansibleResult") or {}
    return str(result.get("completion") or ok.get("lastTransitionTime") or "success")


class CrWatch:
    """One watch on one kind in one namespace, recording when each CR succeeded."""

    def __init__(self, api: client.ApiClient, namespace: str, kind: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.plural = KINDS[kind]
        self.requests: Counter[RequestKey] = Counter()
        self._cond = threading.Condition()
        self._marker: dict[str, str] = {}
        self._succeeded_at: dict[tuple[str, str], float] = {}
        self._first_success: dict[str, float] = {}
        self._success_times: list[float] = []  # one per new (name, marker): a run that succeeded
        self._gone: set[str] = set()
        self._deleted_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._loop, name=f"watch-{kind}", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> CrWatch:
        ready = threading.Event()
        self._ready = ready
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError(f"could not start watching {self.plural}: {self.errors}")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(timeout=10)

    def _observe(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        now = time.monotonic()
        with self._cond:
            if kind == "DELETED":
                self._gone.add(name)
                self._deleted_at[name] = now
                self._marker.pop(name, None)
            else:
                self._gone.discard(name)
                marker = success_marker(obj)
                if marker is not None:
                    self._marker[name] = marker
                    if (name, marker) not in self._succeeded_at:
                        self._succeeded_at[(name, marker)] = now
                        self._success_times.append(now)
                    self._first_success.setdefault(name, now)
            self._cond.notify_all()

    def _loop(self) -> None:
        resource_version = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    self.requests[("LIST", GROUP, self.plural, "")] += 1
                    listing: dict[str, Any] = self.custom.list_namespaced_custom_object(  # type: ignore[assignment]
                        GROUP, VERSION, self.namespace, self.plural
                    )
                    for item in listing.get("items", []):
                        self._observe("ADDED", item)
                    resource_version = listing["metadata"]["resourceVersion"]
                    self._ready.set()
                self._watch = watch.Watch()
                self.requests[("WATCH", GROUP, self.plural, "")] += 1
                for event in self._watch.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    self.plural,
                    resource_version=resource_version,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                ):
                    obj = event["object"]
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._observe(event["type"], obj)
                    if self._stop.is_set():
                        break
            except client.ApiException as err:
                if err.status == 410:
                    resource_version = None  # expired: list again
                    continue
                self.errors.append(str(err))
                time.sleep(0.5)
            except Exception as err:  # a dropped connection: resume from the last version
                if self._stop.is_set():
                    return
                self.errors.append(repr(err))
                time.sleep(0.5)

    def marker(self, name: str) -> str | None:
        with self._cond:
            return self._marker.get(name)

    def wait_success(
        self, name: str, *, newer_than: str | None = None, timeout: float = 300
    ) -> float:
        """Wait until `name` is Successful with a marker other than `newer_than`;
        return the monotonic time at which that was first seen."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                marker = self._marker.get(name)
                if marker is not None and marker != newer_than:
                    return self._succeeded_at[(name, marker)]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.plural}/{name} not Successful after {timeout:.0f}s")
                self._cond.wait(min(left, 1.0))

    def wait_gone(self, name: str, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        with self._cond:
            while name not in self._gone:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.plural}/{name} not deleted after {timeout:.0f}s")
                self._cond.wait(min(left, 1.0))
            return self._deleted_at[name]

    def succeeded_count(self) -> int:
        with self._cond:
            return len(self._marker)

    def successes_between(self, began: float, ended: float) -> int:
        """Successful runs seen in [began, ended) (monotonic): each new marker of any CR."""
        with self._cond:
            return sum(1 for t in self._success_times if began <= t < ended)

    def wait_converged(
        self,
        names: list[str],
        deadline: float,
        progress: Callable[[int], None] | None = None,
        every: float = 60.0,
    ) -> tuple[int, float]:
        """Wait until every CR in `names` has been Successful once, or until `deadline`
        (monotonic). Return how many were and when the last of them was first seen.

        Checks once a second rather than on every event, so that a fleet of 10,000 CRs
        (tens of thousands of watch events) costs the benchmark next to nothing."""
        pending = set(names)
        next_progress = time.monotonic() + every
        while True:
            with self._cond:
                pending = {n for n in pending if n not in self._first_success}
                done = len(names) - len(pending)
                last = max((self._first_success[n] for n in names if n not in pending), default=0.0)
            now = time.monotonic()
            if not pending or now >= deadline:
                return done, last
            if progress is not None and now >= next_progress:
                progress(done)
                next_progress = now + every
            time.sleep(min(1.0, max(0.0, deadline - now)))

    def wait_all(self, names: list[str], timeout: float) -> float:
        """Wait until every CR in `names` is Successful; return when the last one was seen."""
        deadline = time.monotonic() + timeout
        last = 0.0
        for name in names:
            last = max(last, self.wait_success(name, timeout=max(1.0, deadline - time.monotonic())))
        return last


# -- the cluster ---------------------------------------------------------------------


class BenchCluster:
    """A dedicated testbed control plane for the benchmark."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="ao-bench-"))
        self.control_plane = ControlPlane(
            Layout(state_dir=self.state_dir, cache_dir=default_cache_dir())
        )
        self.api: client.ApiClient | None = None
        self.kubeconfig = self.control_plane.layout.kubeconfig
        self.server = ""

    def up(self) -> str:
        report = self.control_plane.up()
        self.server = report.server
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.install_crds()
        return report.summary()

    def down(self) -> None:
        if self.api is not None:
            self.api.close()
            self.api = None
        self.control_plane.down()

    def __enter__(self) -> BenchCluster:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @property
    def client(self) -> client.ApiClient:
        assert self.api is not None, "cluster is not up"
        return self.api

    def pids(self) -> list[int]:
        """Pids of the control plane's processes (from its state file)."""
        try:
            state = json.loads(self.control_plane.layout.state_file.read_text())
        except (OSError, ValueError):
            return []
        return [int(p["pid"]) for p in state.get("processes", [])]

    def install_crds(self) -> None:
        ext = client.ApiextensionsV1Api(self.client)
        names = []
        for doc in yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text()):
            names.append(doc["metadata"]["name"])
            try:
                ext.create_custom_resource_definition(doc)
            except client.ApiException as err:
                if err.status != 409:
                    raise
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            crds = [ext.read_custom_resource_definition(n) for n in names]
            if all(
                any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
                for crd in crds
                if crd.status and crd.status.conditions
            ) and all(crd.status and crd.status.conditions for crd in crds):
                break
            time.sleep(0.2)
        else:
            raise TimeoutError("bench CRDs not established after 60 s")
        # Until the API server's watch cache for a new kind is ready, lists of it
        # answer 429 "storage is (re)initializing"; operators would start into that.
        custom = client.CustomObjectsApi(self.client)
        for plural in KINDS.values():
            while True:
                try:
                    custom.list_cluster_custom_object(GROUP, VERSION, plural, limit=1)
                    break
                except client.ApiException as err:
                    if err.status != 429 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)

    def new_namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        core = client.CoreV1Api(self.client)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait for the default ServiceAccount's controller
            try:
                core.read_namespaced_config_map("kube-root-ca.crt", name)
                break
            except client.ApiException:
                time.sleep(0.1)
        return name

    @contextmanager
    def watching(self, namespace: str, kind: str) -> Iterator[CrWatch]:
        with CrWatch(self.client, namespace, kind) as crs:
            yield crs

    # -- CR operations, each counted so they can be subtracted from the API figures --

    def create_cr(
        self, namespace: str, kind: str, name: str, value: str, own: Counter[RequestKey]
    ) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"value": value},
        }
        own[("POST", GROUP, KINDS[kind], "")] += 1
        client.CustomObjectsApi(self.client).create_namespaced_custom_object(
            GROUP, VERSION, namespace, KINDS[kind], body
        )

    def update_cr(
        self, namespace: str, kind: str, name: str, value: str, own: Counter[RequestKey]
    ) -> None:
        own[("PATCH", GROUP, KINDS[kind], "")] += 1
        client.CustomObjectsApi(self.client).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, KINDS[kind], name, {"spec": {"value": value}}
        )

    def delete_cr(self, namespace: str, kind: str, name: str, own: Counter[RequestKey]) -> None:
        own[("DELETE", GROUP, KINDS[kind], "")] += 1
        client.CustomObjectsApi(self.client).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, KINDS[kind], name
        )

    def count_objects(self, namespace: str) -> dict[str, int]:
        """ConfigMaps and Secrets the roles left in `namespace` (kube-root-ca.crt excluded)."""
        core = client.CoreV1Api(self.client)
        cms = [
            c
            for c in core.list_namespaced_config_map(namespace).items
            if c.metadata is None or c.metadata.name != "kube-root-ca.crt"
        ]
        secrets = core.list_namespaced_secret(namespace).items
        return {"configmaps": len(cms), "secrets": len(secrets)}
