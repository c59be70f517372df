"""The exception hierarchy. Every error the operator raises on purpose is one of these.

    OperatorError                 base; never raised itself
    ├── ConfigError               bad watches.yaml, flag or environment variable: permanent,
    │                             the message names the file, entry, key and what is wrong
    ├── RetryLater                transient: try the same thing again after `delay` seconds
    │   └── KubeUnavailable       the API server could not be reached or answered 5xx/429
    ├── ApiError                  the API server refused one request (a 4xx but 404/409/429);
    │   ├── NotFound              404: the object or its kind does not exist
    │   └── Conflict              409: changed since it was read, or already exists
    ├── Permanent                 this custom resource cannot be run until it changes
    │   ├── RunSetupError         an Ansible run could not be prepared (missing role, bad dir)
    │   └── InvalidResource       the custom resource cannot become a run's variables
    │                             (nested deeper than launch.extravars.MAX_DEPTH)
    ├── BadAnnotation             an annotation of the CR has a value the operator cannot use
    └── WarmStartError            a warm Ansible server cannot start (or refuses to, when a
                                  pre-import would freeze per-run configuration): runs go cold

Where each is acted on (one place each):

* Permanent is caught by the reconciler (controller/reconciler.py) around the set-up of
  a run. It reports it on the CR (Failure condition, Warning Event, once) and returns
  `Outcome(terminal=...)`: a value, not a raise. The queue then resets the backoff
  and comes back only at the reconcile period, or when the CR changes.
* BadAnnotation is caught by the reconciler too, reported the same way, and retried
  with backoff, as the Go operator does: a fix of only the annotation is no change the
  watch lets through (unless `watchAnnotationsChanges`).
* Everything else raised out of a reconcile, whatever its class, was not reported on
  the CR, and reaches the worker pool (controller/workers.py), which retries with
  backoff: RetryLater after its own `delay` when it has one (a Retry-After), any other
  error with the queue's per-key exponential backoff. An ApiError is one request's
  refusal, not the resource's: a Conflict, or a 403 an admin fixes, is worth trying
  again as a whole reconcile. controller/contract.py maps an outcome to what the queue
  does and to the reconcile metric's label, in one function.
* ConfigError at start-up: exit code 1 with the message, before anything is watched.
* WarmStartError: logged by warm/supervisor.py; runs take the cold path.

Code that must survive any failure of one call (leader election, shard membership,
dependent watches) catches OperatorError, which covers ApiError too.
"""

from __future__ import annotations


class OperatorError(Exception):
    """Base of every deliberate error of this package."""


class ConfigError(OperatorError):
    """Configuration that cannot be used. Raised at load time, never mid-reconcile."""


class RetryLater(OperatorError):
    """A transient failure: the same operation may succeed after `delay` seconds."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class KubeUnavailable(RetryLater):
    """The Kubernetes API could not be reached, or asked us to slow down."""


class ApiError(OperatorError):
    """The API server rejected one request; sending the same request again cannot help.

    Not Permanent: the same reconcile later sends other requests (a fresh
    resourceVersion after a Conflict, say), so it is retried with backoff.
    """

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """The object (or its kind) does not exist."""


class Conflict(ApiError):
    """The object changed since it was read (resourceVersion mismatch) or already exists."""


class Permanent(OperatorError):
    """This custom resource cannot be run until it (or its role) changes."""


class RunSetupError(Permanent):
    """An Ansible run could not be prepared."""


class InvalidResource(Permanent):
    """The custom resource itself cannot be run: no Ansible run is attempted until it changes.

    Raised by launch.extravars.build_extravars, for example for a spec nested
    deeper than the operator passes to Ansible; the message names the field
    and where, so it can go as it is into the Failure condition and Event.
    """


class BadAnnotation(OperatorError):
    """An annotation of the custom resource has a value the operator cannot use; the
    message names the annotation, the value and what is accepted."""


class WarmStartError(OperatorError):
    """A warm Ansible server (see the warm package) could not be started or refused to.

    Never fatal: the operator logs it and its runs take the cold path.
    """
