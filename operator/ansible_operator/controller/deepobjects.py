"""Let kopf deliver objects of any nesting depth to our event handlers.

Where this sits: `controller.watching.register` calls `install(registry)` for
every primary watch, before the manager starts kopf. Two things in kopf 1.45
(the version pinned in requirements/constraints.txt) fail on a deeply nested
custom resource, which the API server accepts up to about 10,000 levels:

1. Decoding. kopf decodes watch-stream lines with json.loads and list
   responses with aiohttp's `response.json()` (json.loads again). From about
   990 levels that raises RecursionError inside kopf's watcher task; kopf
   then stops, the operator exits 1, and does so again after every restart,
   so no custom resource of any kind is reconciled any more. `install` gives
   kopf's API module `kube.deepjson.loads`, which decodes any depth.
2. The diff base. For every event kopf deep-copies the whole object into a
   "diff-base essence" and diffs it against the previous one, even when, as
   here, only low-level `on.event` handlers are registered, which never look
   at it. From about 490 levels the copy raises RecursionError; kopf logs it
   and drops the event, so the custom resource was silently ignored. An
   essence that is always empty loses nothing for `on.event` handlers and
   saves a deep copy of every object on every event.

Once delivered, such an object reaches the reconciler like any other, which
reads it with kube.client (also deepjson) and reports it: build_extravars
refuses it with a message naming how deep it is (launch.extravars.MAX_DEPTH).

kopf's API module is private, so `install` checks that it still looks the way
this code expects; if not, it logs an error and leaves kopf as it is (the
operator then works as before, only without this protection), and the unit
tests of this module fail, so an upgrade of kopf cannot drop it unnoticed.
"""

from __future__ import annotations

import inspect
import json
import logging
import types
import weakref
from collections.abc import Iterable
from typing import Any, cast

import aiohttp

from ansible_operator.controller.kopfimport import kopf, kopf_api
from ansible_operator.kube import deepjson

log = logging.getLogger("ansible_operator.deepobjects")

__all__ = ["EmptyDiffBase", "install", "kopf_decoding_guarded"]

# kopf.api.stream calls `json.loads` through its module global `json`: it gets
# this stand-in, which is the json module in every other respect.
_JSON_FOR_KOPF = types.SimpleNamespace(**{**vars(json), "loads": deepjson.loads})
_guarded_registries: weakref.WeakSet[kopf.OperatorRegistry] = weakref.WeakSet()


async def _get(
    url: str,
    *,
    settings: kopf.OperatorSettings,
    payload: object | None = None,
    headers: dict[str, str] | None = None,
    timeout: aiohttp.ClientTimeout | None = None,
    logger: Any,
) -> Any:
    """kopf's `api.get`, with the response decoded by deepjson instead of json."""
    response = await kopf_api.request(
        method="get",
        url=url,
        payload=payload,
        headers=headers,
        timeout=timeout,
        settings=settings,
        logger=logger,
    )
    async with response:
        return await response.json(loads=deepjson.loads)


# kopf's own, for tests that need kopf as it ships.
_ORIGINAL_GET = kopf_api.get


def _kopf_as_expected() -> bool:
    # `_get` replaces kopf's get only if it takes exactly the same arguments.
    expected = inspect.signature(_get).parameters.keys()
    return (
        vars(kopf_api).get("json") is json
        and inspect.iscoroutinefunction(kopf_api.get)
        and inspect.signature(kopf_api.get).parameters.keys() == expected
        and callable(getattr(kopf_api, "request", None))
        and inspect.isasyncgenfunction(getattr(kopf_api, "stream", None))
    )


def kopf_decoding_guarded() -> bool:
    """Whether kopf's API module decodes with deepjson (after a successful `install`)."""
    return vars(kopf_api).get("json") is _JSON_FOR_KOPF and kopf_api.get is _get


def _guard_decoding() -> bool:
    if kopf_decoding_guarded():
        return True
    if not _kopf_as_expected():
        log.error(
            "kopf %s is not the version this operator was written for: objects nested "
            "deeper than about 990 levels may stop the watch",
            getattr(kopf, "__version__", "?"),
        )
        return False
    # Module attributes are looked up at call time, by kopf's own callers too.
    vars(kopf_api)["json"] = _JSON_FOR_KOPF
    kopf_api.get = _get
    return True


class EmptyDiffBase(kopf.DiffBaseStorage):
    """A diff base that keeps nothing: our `on.event` handlers never read kopf's diffs.

    kopf's change-detecting handlers (on.create, on.update, on.field...) would
    see every event as new with it: the operator registers none, and must not.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return cast(kopf.BodyEssence, {})

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def install(registry: kopf.OperatorRegistry) -> bool:
    """Guard kopf's decoding (once per process) and its diff base (once per registry).

    Returns whether decoding is guarded; the diff base is replaced either way.
    """
    guarded = _guard_decoding()
    if registry in _guarded_registries:
        return guarded
    _guarded_registries.add(registry)

    @kopf.on.startup(registry=registry, id="ansible-operator-empty-diff-base")
    def empty_diff_base(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.diffbase_storage = EmptyDiffBase()

    return guarded
