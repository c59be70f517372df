"""A run's Running condition and Event: written before it, or only if the run lasts.

Where it sits: the reconciler (controller/reconciler.py) builds one `RunningMark`
per run, calls `start()` just before Ansible starts and `finish()` once it ended;
the writes themselves are controller/reporting.py's.

With no delay (`--running-condition-delay=0`, the Go operator's behaviour) the
Running condition is written and the Running Event posted before the run starts,
and the run gets the object as that write returned it. With a delay (default 1s)
both come only if the run is still going when the delay is over, from a timer
thread: a run shorter than that goes from its previous status straight to
Successful or Failure, two API requests fewer, while what anyone watching sees
of a run that lasts is unchanged. `finish()` waits for a write in flight, so the
final status write always comes after it and starts from the object it returned.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ansible_operator.controller.reporting import RUNNING, Reporter
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import ResourceInfo

__all__ = ["RunningMark"]

log = logging.getLogger("ansible_operator.reconciler")


class RunningMark:
    """One run's Running condition (when `res`: the status is managed) and Event."""

    def __init__(
        self, report: Reporter, res: ResourceInfo | None, obj: dict[str, Any], *, delay: float
    ) -> None:
        self._report, self._res, self._delay = report, res, delay
        self._obj: dict[str, Any] | None = obj  # None: the CR was gone at the write
        self._lock = threading.Lock()
        self._finished = False
        self._timer: threading.Timer | None = None
        self._message = ""

    def before_request(self) -> dict[str, Any] | None:
        """Without a delay, the Running condition now, before the run is built (the run
        sees the object as written): the object to run, or None when the CR is gone."""
        if self._delay <= 0 and self._res is not None and self._obj is not None:
            self._obj = self._report.running(self._res, self._obj)
        return self._obj

    def start(self, message: str) -> None:
        """Just before Ansible starts: the Running Event now, or both later."""
        self._message = message
        if self._delay <= 0:
            self._event()
            return
        self._timer = threading.Timer(self._delay, self._late)
        self._timer.daemon = True
        self._timer.start()

    def finish(self) -> dict[str, Any] | None:
        """After the run: the latest object (as a Running write returned it), or None
        when the CR was gone at that write."""
        with self._lock:  # a write in flight ends before this returns
            self._finished = True
            if self._timer is not None:
                self._timer.cancel()
            return self._obj

    def _late(self) -> None:
        with self._lock:
            if self._finished or self._obj is None:
                return
            try:
                if self._res is not None:
                    self._obj = self._report.running(self._res, self._obj)
                self._event()
            except OperatorError as err:  # the run goes on; its final write reports it
                log.warning("could not write the Running condition: %s", err)

    def _event(self) -> None:
        if self._obj is not None:
            self._report.event(self._obj, type="Normal", reason=RUNNING, message=self._message)
