"""The settings of sharded mode (`--sharding`), checked before a replica joins.

Where this sits: controller/wiring.py fills `ShardOptions` from the run flags and
controller/sharding/shard.py's `make_shard` calls `check_options`, which raises a
ConfigError naming the flag when the settings cannot work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_operator.errors import ConfigError

__all__ = ["ShardOptions", "check_options"]


@dataclass(frozen=True)
class ShardOptions:
    """What `--sharding` needs from the run flags (controller.manager fills it)."""

    namespace: str
    group: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    load_factor: float


def check_options(options: ShardOptions) -> None:
    """Raise ConfigError naming the flag when the sharding settings cannot work."""
    if not options.group:
        raise ConfigError("--sharding needs --leader-election-id: it names the shard group")
    if len(options.group) > 63 or not re.fullmatch(
        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", options.group
    ):
        raise ConfigError(
            f"--leader-election-id {options.group!r}: with --sharding it must be a valid "
            "label value (at most 63 letters, digits, '-', '_' or '.')"
        )
    if not 0 < options.retry_period < options.renew_deadline < options.lease_duration:
        raise ConfigError(
            "--sharding needs --leader-elect-retry-period < --leader-elect-renew-deadline "
            "< --leader-elect-lease-duration"
        )
