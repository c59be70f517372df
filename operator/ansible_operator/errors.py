"""The exception hierarchy. Every error the operator raises on purpose is one of these.

    OperatorError                 base; never raised itself
    ├── ConfigError               bad watches.yaml, flag or environment variable: permanent,
    │                             the message names the file, entry, key and what is wrong
    ├── RetryLater                transient: try the same thing again after `delay` seconds
    │   └── KubeUnavailable       the API server could not be reached or answered 5xx/429
    ├── Permanent                 retrying the same input cannot help (until the input changes)
    │   ├── RunSetupError         an Ansible run could not be prepared (missing role, bad dir)
    │   └── InvalidResource       the custom resource cannot become a run's variables
    │                             (nested deeper than runner.extravars.MAX_DEPTH)
    └── WarmStartError            a warm Ansible server cannot start (or refuses to, when a
                                  pre-import would freeze per-run configuration): runs go cold

The controller maps these to behaviour (controller.reconciler reports,
controller.workers schedules, docs/status.md tells users):

* Permanent, when it stops a reconcile (the run cannot be prepared): a
  Failure condition and a Warning Event carry its message, once; then no
  backoff retries. The CR is reconciled again when it changes,
  when its reconcile period comes, or when the operator restarts.
* RetryLater: requeue after `delay` seconds when the raiser knows how long
  (a Retry-After, say), else with the queue's per-key exponential backoff.
* Anything raised out of a reconcile, whatever its class, was not reported to
  the CR: it is retried with backoff. (kube.client's ApiError family is
  Permanent for one request, but a Conflict or a 403 fixed by an admin is
  worth trying again as a whole reconcile.)
* ConfigError at start-up: exit code 1 with the message, before anything is
  watched.
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


class Permanent(OperatorError):
    """Retrying the same input cannot succeed."""


class RunSetupError(Permanent):
    """An Ansible run could not be prepared."""


class InvalidResource(Permanent):
    """The custom resource itself cannot be run: no Ansible run is attempted until it changes.

    Raised by runner.extravars.build_extravars, for example for a spec nested
    deeper than the operator passes to Ansible; the message names the field
    and where, so it can go as it is into the Failure condition and Event.
    """


class WarmStartError(OperatorError):
    """A warm Ansible server (see the warm package) could not be started or refused to.

    Never fatal: the operator logs it and its runs take the cold path.
    """
