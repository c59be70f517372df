"""controller.deepobjects: kopf delivers custom resources of any depth to our event handler.

These tests run kopf's own code (its API module against a local aiohttp
server, its event processing with our registered handler), guarded and
unguarded, so they show both the failure in the pinned kopf and the fix; if a
kopf upgrade changes either, they say so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import types
from typing import Any, cast

import kopf
import pytest
from aiohttp import web
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import auth
from kopf._cogs.structs import credentials
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller import deepobjects
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.controller.watching import PrimaryWatch, register
from ansible_operator.kube import deepjson

WATCH = Watch(gvk=GVK("g.example.com", "v1", "Thing"))
RESOURCE = kopf.Resource("g.example.com", "v1", "things", kind="Thing", namespaced=True)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def thing(depth: int) -> dict[str, Any]:
    meta = {"name": "n", "namespace": "ns", "uid": "u", "resourceVersion": "1", "generation": 1}
    return {
        "apiVersion": "g.example.com/v1",
        "kind": "Thing",
        "metadata": meta,
        "spec": nested(depth),
    }


@pytest.fixture
def unguarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's API module as kopf ships it; monkeypatch restores it after the test."""
    monkeypatch.setitem(vars(kopf_api), "json", json)
    monkeypatch.setattr(kopf_api, "get", deepobjects._ORIGINAL_GET)


async def _through_kopf(obj: dict[str, Any]) -> tuple[Any, Any]:
    """`obj` as kopf's list call (api.get) and watch stream (api.stream) decode it."""

    async def listing(request: web.Request) -> web.Response:
        page = {"items": [obj], "metadata": {"resourceVersion": "1"}}
        return web.Response(text=deepjson.dumps(page), content_type="application/json")

    async def watching(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(deepjson.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/list", listing)
    app.router.add_get("/watch", watching)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    vault = credentials.Vault()
    await vault.populate({"test": credentials.ConnectionInfo(server=f"http://127.0.0.1:{port}")})
    auth.vault_var.set(vault)
    settings, logger = kopf.OperatorSettings(), logging.getLogger("test")
    try:
        listed = await kopf_api.get("/list", settings=settings, logger=logger)
        events = [
            event async for event in kopf_api.stream("/watch", settings=settings, logger=logger)
        ]
        return listed["items"][0], events[0]["object"]
    finally:
        async for _, _, context in vault.extended(auth.APIContext, "contexts"):
            await context.session.close()
        await runner.cleanup()


@pytest.mark.usefixtures("unguarded")
@pytest.mark.parametrize(
    ("guarded", "depth", "decoded"),
    [
        (False, 50, True),
        (False, 1500, False),  # kopf 1.45 as shipped: RecursionError ends its watcher
        (True, 50, True),
        (True, 1500, True),
        (True, 9_990, True),
    ],
)
def test_kopfs_list_and_watch_decode_any_depth_once_guarded(
    guarded: bool, depth: int, decoded: bool
) -> None:
    if guarded:
        assert deepobjects.install(kopf.OperatorRegistry())
        assert deepobjects.kopf_decoding_guarded()
    obj = thing(depth)
    if not decoded:
        with pytest.raises(RecursionError):
            asyncio.run(_through_kopf(obj))
        return
    listed, watched = asyncio.run(_through_kopf(obj))
    assert deepjson.dumps(listed) == deepjson.dumps(obj)
    assert deepjson.dumps(watched) == deepjson.dumps(obj)


async def _process(storage: kopf.DiffBaseStorage | None, obj: dict[str, Any]) -> WorkQueue:
    """One ADDED event through kopf's event processing, to our registered handler."""
    queue = WorkQueue(total_limit=4, backoff_base=1.0, backoff_max=10.0)
    registry = kopf.OperatorRegistry()
    register(registry, PrimaryWatch(WATCH, queue))
    settings = kopf.OperatorSettings()
    if storage is not None:
        settings.persistence.diffbase_storage = storage
    await processing.process_resource_event(
        lifecycle=lifecycles.all_at_once,
        indexers=indexing.OperatorIndexers(),
        registry=registry,
        settings=settings,
        memories=inventory.ResourceMemories(),
        memobase=cast(Any, kopf.Memo()),
        resource=RESOURCE,
        raw_event={"type": "ADDED", "object": cast(Any, obj)},
        event_queue=asyncio.Queue(),
        no_throttling=True,  # so that kopf raises what it would otherwise log and drop
    )
    return queue


@pytest.mark.parametrize(
    ("storage", "depth", "enqueued"),
    [
        (None, 50, True),
        (None, 600, False),  # kopf's default diff base deep-copies every object
        (deepobjects.EmptyDiffBase(), 50, True),
        (deepobjects.EmptyDiffBase(), 600, True),
        (deepobjects.EmptyDiffBase(), 1500, True),
    ],
    ids=["default-50", "default-600", "empty-50", "empty-600", "empty-1500"],
)
def test_kopf_hands_deep_objects_to_the_handler_with_the_empty_diff_base(
    storage: kopf.DiffBaseStorage | None, depth: int, enqueued: bool
) -> None:
    if not enqueued:
        with pytest.raises(RecursionError):
            asyncio.run(_process(storage, thing(depth)))
        return
    assert asyncio.run(_process(storage, thing(depth))).depth() == 1


def test_install_adds_one_startup_handler_per_registry_which_sets_the_empty_diff_base() -> None:
    registry = kopf.OperatorRegistry()
    deepobjects.install(registry)
    deepobjects.install(registry)
    [handler] = registry._activities.get_all_handlers()
    settings = kopf.OperatorSettings()
    cast(Any, handler.fn)(settings=settings)
    assert isinstance(settings.persistence.diffbase_storage, deepobjects.EmptyDiffBase)
    body = kopf.Body(cast(Any, thing(5000)))
    assert settings.persistence.diffbase_storage.build(body=body) == {}
    assert settings.persistence.diffbase_storage.fetch(body=body) is None


@pytest.mark.usefixtures("unguarded")
@pytest.mark.parametrize(
    "change",
    ["json module replaced", "get signature changed", "get no longer async"],
)
def test_a_kopf_that_changed_is_left_alone_and_reported(
    change: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if change == "json module replaced":
        monkeypatch.setitem(vars(kopf_api), "json", types.SimpleNamespace(loads=json.loads))
    elif change == "get signature changed":

        async def get(url: str, *, settings: Any, logger: Any, params: Any = None) -> Any:
            return None

        monkeypatch.setattr(kopf_api, "get", get)
    else:
        monkeypatch.setattr(kopf_api, "get", lambda *args, **kwargs: None)
    before = (vars(kopf_api)["json"], kopf_api.get)
    with caplog.at_level(logging.ERROR, logger="ansible_operator.deepobjects"):
        assert deepobjects.install(kopf.OperatorRegistry()) is False
    assert (vars(kopf_api)["json"], kopf_api.get) == before
    assert "not the version this operator was written for" in caplog.text
