"""Go duration strings ("1h30m", "10s", "1.5h", "-2m", "0"), as Go's time.ParseDuration reads them.

Used wherever the Go operator accepts a duration: `reconcilePeriod` in
watches.yaml, the `--reconcile-period` style flags, the
`ansible.sdk.operatorframework.io/reconcile-period` annotation, and the period
returned by the `requeue_after` module. Results are in seconds (float).
"""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """The text is not a Go duration; the message quotes it as Go does."""


def parse_go_duration(text: str) -> float:
    """Seconds in `text`. Raises DurationError with Go's wording: time: invalid duration "x"."""
    body = text
    sign = 1.0
    if body[:1] in {"+", "-"}:
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f'time: invalid duration "{text}"')
    total = 0.0
    position = 0
    while position < len(body):
        match = _PART.match(body, position)
        if match is None:
            number = re.match(r"(\d+\.?\d*|\.\d+)([^\d.]*)", body[position:])
            if number and number.group(2):
                unit = number.group(2)
                raise DurationError(f'time: unknown unit "{unit}" in duration "{text}"')
            if number:
                raise DurationError(f'time: missing unit in duration "{text}"')
            raise DurationError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return sign * total


def format_go_duration(seconds: float) -> str:
    """A compact Go-style rendering ("1h30m0s"), for log lines and summaries."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    remaining = abs(seconds)
    hours, remaining = divmod(remaining, 3600)
    minutes, secs = divmod(remaining, 60)
    text = f"{secs:g}s"
    if hours or minutes:
        text = f"{int(minutes)}m{text}"
    if hours:
        text = f"{int(hours)}h{text}"
    return sign + text
