"""The read-only proxy of a plan or drift check starts quietly; the operator's says where.

A drift check starts a proxy of its own every period for every CR it checks:
its "API proxy listening" line at INFO buried the operator's log. No cluster:
the runner is a FakeRunner and the proxy is never called.
"""

from __future__ import annotations

import logging
import threading

import pytest

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.kube.login import StaticLogin
from ansible_operator.plan import target
from ansible_operator.plan.engine import plan_with
from ansible_operator.proxy import ApiProxy, RunCredentials
from ansible_operator.runner.fakerunner import FakeRunner

THINGS = ResourceInfo(
    group="x.example.com",
    version="v1",
    kind="Thing",
    plural="things",
    namespaced=True,
    has_status=True,
)
CR = {
    "apiVersion": "x.example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": 1},
    "spec": {},
}


def _listening(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records if r.getMessage().startswith("API proxy listening")]


def test_a_plans_proxy_says_where_it_listens_at_debug_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="ansible_operator")
    watch = Watch(gvk=GVK(THINGS.group, THINGS.version, THINGS.kind), role="/nowhere")
    found = target.Target(watch=watch, resource=THINGS, obj=CR, exists=True)
    kube = Kube(StaticLogin(host="http://localhost"))
    plan_with(
        found,
        kube=kube,
        runner=FakeRunner(),
        ansible_args="",
        deleting=False,
        cancel=threading.Event(),
    )
    assert _listening(caplog) == [logging.DEBUG]


def test_the_operators_proxy_still_says_it_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ansible_operator")
    login = StaticLogin(host="http://localhost")
    proxy = ApiProxy(
        upstream=login,
        credentials=RunCredentials(),
        kube=Kube(login),
        inject_owner_ref=True,
    )
    proxy.start()
    proxy.stop()
    assert _listening(caplog) == [logging.INFO]
