"""Readiness checks: poll HTTP health endpoints and small API queries until
a component is usable.

Called by `control_plane.ControlPlane.up` after each start step. Talks to the
API server with the admin client certificate through the standard library, so
the testbed works before (and without) any Kubernetes client package.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from testbed.pki import PkiFiles


class NotReady(RuntimeError):
    """A component did not become healthy in time; the message says which."""


def insecure_context() -> ssl.SSLContext:
    # kcm and the scheduler serve a throw-away self-signed certificate on loopback.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def admin_context(pki: PkiFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return context


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(
    what: str, check: Callable[[], bool], *, timeout: float, alive: Callable[[], bool] | None = None
) -> float:
    """Poll `check` every 100 ms; return the seconds it took, or raise NotReady."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if alive is not None and not alive():
            raise NotReady(f"{what}: the process exited before it became ready")
        if time.monotonic() - start > timeout:
            raise NotReady(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(0.1)


class Api:
    """A minimal JSON client for the testbed's own API server."""

    def __init__(self, server: str, context: ssl.SSLContext) -> None:
        self.server = server
        self.context = context

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(  # noqa: S310 - loopback URL built by us
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=10) as resp:  # noqa: S310
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            payload = err.read()
            try:
                return err.code, json.loads(payload)
            except ValueError:
                return err.code, payload.decode(errors="replace")
        except (urllib.error.URLError, OSError) as err:
            return 0, str(err)

    def exists(self, path: str) -> bool:
        return self.request("GET", path)[0] == 200


def node_ready(api: Api, name: str) -> bool:
    code, body = api.request("GET", f"/api/v1/nodes/{name}")
    if code != 200:
        return False
    conditions = body.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
