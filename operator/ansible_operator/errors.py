"""The exception hierarchy. Every error the operator raises on purpose is one of these.

    OperatorError                 base; never raised itself
    ├── ConfigError               bad watches.yaml, flag or environment variable: permanent,
    │                             the message names the file, entry, key and what is wrong
    ├── RetryLater                transient: try the same thing again after `delay` seconds
    │   └── KubeUnavailable       the API server could not be reached or answered 5xx/429
    └── Permanent                 retrying the same input cannot help (until the input changes)
        └── RunSetupError         an Ansible run could not be prepared (missing role, bad dir)

The controller maps these to behaviour: RetryLater → requeue with backoff,
Permanent → Failure condition + Event, no hot loop; ConfigError at start-up →
exit code 1 with the message, before anything is watched.
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
