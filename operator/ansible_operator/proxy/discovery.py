"""Which stored resource a run's request addresses, or None when nothing is to be done.

Where it sits: the API proxy asks before deciding a write's ownership
(`ApiProxy.plan`, proxy/server.py) and before its screening rules (proxy/screen.py).
Discovery is the Kube client's, cached there; this module only decides what a miss
or a failure means for the request: it is forwarded as it is.
"""

from __future__ import annotations

import logging

from ansible_operator.errors import NotFound, OperatorError
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.proxy.ownership import RequestInfo

__all__ = ["resource_of"]

log = logging.getLogger("ansible_operator.proxy")


def resource_of(kube: Kube, info: RequestInfo) -> ResourceInfo | None:
    """The resource `info` addresses; None when it is unknown, virtual or undiscoverable."""
    try:
        return kube.resource_for_plural(
            group=info.group, version=info.version, plural=info.resource
        )
    except NotFound:
        # Unknown (even after re-reading discovery) or virtual: the API
        # server answers the request itself; nothing to own.
        return None
    except OperatorError as err:
        # A broken discovery must not fail the run's request (SDK #3112):
        # forward it unowned, and say so.
        log.warning(
            "Discovery of %s/%s failed; forwarding without ownership: %s",
            info.group or "core",
            info.resource,
            err,
        )
        return None
