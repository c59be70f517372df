"""Running kopf: the primary watches' registry, our login, our signal handling, the loop.

Where it sits: controller/manager.py calls `run_watches()` once the reconcile
machinery is built (controller/wiring.py); it returns when the stop flag is set
(SIGTERM, SIGINT, a lost Lease) or kopf stops. kopf is imported here, in
controller/watching.py (the primary watch's event handlers) and in
controller/deepobjects.py (kopf reading objects of any depth), and nowhere else:
an import-linter contract keeps it so.

kopf runs in the main thread's event loop. It logs in with the operator's own
client configuration (kube/login.py: no key on disk), posts no Events of its
own (we post ours) and logs only warnings unless the operator logs at debug.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Sequence
from typing import Any

from ansible_operator.controller.kopfimport import kopf
from ansible_operator.controller.watching import PrimaryWatch, register
from ansible_operator.kube.client import Kube

__all__ = ["run_watches"]

log = logging.getLogger("ansible_operator.manager")


def run_watches(
    primaries: Sequence[PrimaryWatch],
    *,
    kube: Kube,
    namespaces: Sequence[str],
    stop_flag: threading.Event,
    ready: threading.Event,
) -> None:
    """Watch every primary kind until `stop_flag` is set; `ready` is set once kopf
    watches (the readiness probe reads it)."""
    registry = kopf.OperatorRegistry()
    for primary in primaries:
        register(registry, primary)
    _register_basics(registry, kube)
    asyncio.run(_serve(registry, namespaces=namespaces, stop_flag=stop_flag, ready=ready))


async def _serve(
    registry: kopf.OperatorRegistry,
    *,
    namespaces: Sequence[str],
    stop_flag: threading.Event,
    ready: threading.Event,
) -> None:
    kwargs: dict[str, Any] = {"clusterwide": True}
    if namespaces:
        kwargs = {"namespaces": list(namespaces)}
    # kopf waits for a threading.Event in an executor thread that cannot be
    # cancelled, and gives such "hung" tasks 5 s at shutdown; an asyncio flag,
    # set from our threading flag by a small bridge thread, stops it at once.
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def bridge() -> None:
        stop_flag.wait()
        with contextlib.suppress(RuntimeError):  # the loop may be closed already
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=bridge, name="stop-bridge", daemon=True).start()
    _take_over_signals(registry, stop_flag=stop_flag, stop=stop)
    try:
        await kopf.operator(
            registry=registry, standalone=True, stop_flag=stop, ready_flag=ready, **kwargs
        )
    finally:
        stop_flag.set()  # ends the bridge thread when kopf stopped on a signal


def _take_over_signals(
    registry: kopf.OperatorRegistry, *, stop_flag: threading.Event, stop: asyncio.Event
) -> None:
    """Replace kopf's SIGTERM/SIGINT handlers, once installed, by ours.

    kopf stops on a signal through its own flag and then finds the waiter of our
    stop flag still pending; it treats that as a hung task and waits 5 s for it
    before exiting. Setting our flag instead stops kopf at once: an idle
    operator exits in well under a second, which rolling updates and leader
    hand-over feel.
    """

    def on_signal(sig: signal.Signals) -> None:
        log.info("Signal %s received: stopping", sig.name)
        stop_flag.set()
        stop.set()

    @kopf.on.startup(registry=registry)
    async def take_signals(**_: Any) -> None:
        # Startup handlers run after kopf has installed its handlers, so ours
        # replace them; kopf installs none outside the main thread, nor do we.
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, on_signal, sig)


def _register_basics(registry: kopf.OperatorRegistry, kube: Kube) -> None:
    @kopf.on.login(registry=registry)
    def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
        # Our own client's login, not kopf.login_via_client: that one loads the
        # kubeconfig again and leaves its embedded keys in $TMPDIR (kube/login.py).
        return kopf.ConnectionInfo(**kube.login_fields(), trust_env=settings.networking.trust_env)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # We post our own Events with our own reasons; kopf's would duplicate them.
        settings.posting.enabled = False
        # kopf's per-event logging is noise next to our JSON lines, unless the user
        # asked for debug output.
        if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
            logging.getLogger("kopf").setLevel(logging.WARNING)
