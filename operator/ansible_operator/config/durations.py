"""Go duration strings ("1h30m", "10s", "1.5h", "-2m", "0"), as Go's time.ParseDuration reads them.

Used wherever the Go operator accepts a duration: `reconcilePeriod` in
watches.yaml (:mod:`ansible_operator.config.watches`), the
`--reconcile-period` style flags (cli), the
`ansible.sdk.operatorframework.io/reconcile-period` annotation, and the period
returned by the `requeue_after` module (controller). Results are in seconds
(float).

The parser works in integer nanoseconds like Go, so what Go rejects
(overflow past ~292 years, "1hx", "1.h5") is rejected here too, with Go's
wording, and what it accepts gives the same value.
"""

from __future__ import annotations

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_LIMIT = 1 << 63
_DIGITS = "0123456789"


class DurationError(ValueError):
    """The text is not a Go duration; the message quotes it as Go does."""


def _quote(text: str) -> str:
    # Go's time package quotes with its own rule, not strconv.Quote: bytes of
    # non-ASCII and control characters become \xNN, only " and \ are escaped.
    out = ['"']
    for char in text:
        if char < " " or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
        elif char in '"\\':
            out.append("\\" + char)
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _invalid(text: str) -> DurationError:
    return DurationError(f"time: invalid duration {_quote(text)}")


def _leading_digits(body: str, start: int) -> int:
    end = start
    while end < len(body) and body[end] in _DIGITS:
        end += 1
    return end


def _fraction(digits: str) -> tuple[int, float]:
    # Like Go, stop accumulating (but keep consuming) once more digits could
    # not change a nanosecond count.
    value, scale = 0, 1.0
    for char in digits:
        candidate = value * 10 + int(char)
        if value > (_LIMIT - 1) // 10 or candidate > _LIMIT:
            break
        value, scale = candidate, scale * 10
    return value, scale


def _component(text: str, body: str, position: int) -> tuple[int, int]:
    """The nanoseconds of the `<number><unit>` starting at `position`, and where it ends."""
    if body[position] != "." and body[position] not in _DIGITS:
        raise _invalid(text)
    int_end = _leading_digits(body, position)
    whole = int(body[position:int_end] or "0")
    if whole > _LIMIT:
        raise _invalid(text)
    frac_end, frac, scale = int_end, 0, 1.0
    if int_end < len(body) and body[int_end] == ".":
        frac_end = _leading_digits(body, int_end + 1)
        frac, scale = _fraction(body[int_end + 1 : frac_end])
    if int_end == position and frac_end <= int_end + 1:
        raise _invalid(text)  # neither digits before nor after the dot
    unit_end = frac_end
    while unit_end < len(body) and body[unit_end] != "." and body[unit_end] not in _DIGITS:
        unit_end += 1
    unit = body[frac_end:unit_end]
    if not unit:
        raise DurationError(f"time: missing unit in duration {_quote(text)}")
    if unit not in _NS_PER_UNIT:
        raise DurationError(f"time: unknown unit {_quote(unit)} in duration {_quote(text)}")
    per_unit = _NS_PER_UNIT[unit]
    if whole > _LIMIT // per_unit:
        raise _invalid(text)
    value = whole * per_unit
    if frac > 0:
        value += int(float(frac) * (float(per_unit) / scale))
    if value > _LIMIT:
        raise _invalid(text)
    return value, unit_end


def _parse_nanoseconds(text: str) -> int:
    body, negative = text, False
    if body[:1] in {"+", "-"}:
        negative, body = body[0] == "-", body[1:]
    if body == "0":
        return 0
    if not body:
        raise _invalid(text)
    total, position = 0, 0
    while position < len(body):
        value, position = _component(text, body, position)
        total += value
        if total > _LIMIT:
            raise _invalid(text)
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise _invalid(text)
    return total


def parse_go_duration(text: str) -> float:
    """Seconds in `text`. Raises DurationError with Go's wording: time: invalid duration "x"."""
    return _parse_nanoseconds(text) / 1e9


def _decimal(amount: int, unit: int) -> str:
    whole, rest = divmod(amount, unit)
    if not rest:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}.{rest:0{width}d}".rstrip("0")


def format_go_duration(seconds: float) -> str:
    """Go's Duration.String() ("1h30m0s", "500ms", "0s"), for log lines and summaries."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_decimal(nanos, 1_000)}µs"
    if nanos < 1_000_000_000:
        return f"{sign}{_decimal(nanos, 1_000_000)}ms"
    whole_seconds = nanos // 1_000_000_000
    text = _decimal(nanos % 60_000_000_000, 1_000_000_000) + "s"
    if whole_seconds >= 60:
        text = f"{whole_seconds // 60 % 60}m{text}"
    if whole_seconds >= 3600:
        text = f"{whole_seconds // 3600}h{text}"
    return sign + text
