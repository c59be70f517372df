"""The API proxy's read-only mode, as pure functions: dry runs and refusals.

Where it sits: `proxy.handler` asks these functions about every request of a
run whose token was issued read-only (`Owner.read_only`: `ansible-operator
plan`, see ansible_operator.plan). Such a run
must not change the cluster whatever its modules do, check mode or not:

* every mutating request (POST, PUT, PATCH, DELETE) goes to the API server as
  a server-side dry run: `dryRun=All` is added to its query (`dry_run_target`),
  so admission, defaulting and validation apply and nothing is stored;
* requests that cannot be dry-run are refused with 403 and a message saying
  why (`refusal`): connection upgrades and the exec, attach, portforward and
  proxy subresources (they act on running containers or services, not on
  stored objects), and writes to paths that are not API resources.

Reads pass unchanged. The handler hands each dry-run write's answer to
`ApiProxy.on_dry_run`, which is how a plan learns what the run would change.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from ansible_operator.proxy.ownership import RequestInfo

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# Subresources that reach into a running container or service: no dry run exists.
_LIVE_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


@dataclass(frozen=True, slots=True)
class DryRunWrite:
    """One write of a read-only run, as sent upstream and as answered."""

    method: str
    target: str  # path and query as sent, dryRun=All included
    info: RequestInfo
    content_type: str
    body: bytes  # the request body sent (ownership injected)
    status: int  # the API server's status code, or 403 for a refusal
    response: bytes  # the API server's answer (the object as it would be stored)
    refused: str = ""  # why the proxy refused the request; empty when it was sent


def dry_run_target(target: str) -> str:
    """`target` with `dryRun=All` in its query, replacing any dryRun it had.

    Other parameters are kept exactly as they were written (order, encoding).
    """
    path, sep, rest = target.partition("?")
    query, hash_sep, fragment = rest.partition("#")
    kept = [
        part
        for part in (query.split("&") if sep else [])
        if part and urllib.parse.unquote_plus(part.partition("=")[0]) != "dryRun"
    ]
    kept.append("dryRun=All")
    return f"{path}?{'&'.join(kept)}{hash_sep}{fragment}"


def refusal(method: str, info: RequestInfo, *, upgrade: bool) -> str:
    """Why a read-only run may not send this request; empty when it may."""
    first = info.subresource.partition("/")[0]
    if upgrade or first in _LIVE_SUBRESOURCES:
        what = first if first in _LIVE_SUBRESOURCES else "connection upgrade"
        return (
            f"read-only run (plan): {method} {info} refused: {what} requests cannot be "
            "dry-run, so they are not sent"
        )
    if method.upper() in MUTATING and not info.is_resource:
        return (
            f"read-only run (plan): {method} {info} refused: only API resources can be "
            "written as a dry run"
        )
    return ""
