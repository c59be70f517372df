"""Go duration strings: what time.ParseDuration accepts, rejects (with its wording) and prints."""

from __future__ import annotations

import pytest

from ansible_operator.config.durations import (
    DurationError,
    format_go_duration,
    parse_go_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("+0", 0.0),
        ("-0", 0.0),
        ("0s", 0.0),
        ("5s", 5.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("-2m", -120.0),
        ("+3ms", 0.003),
        ("1us", 1e-6),
        ("1µs", 1e-6),
        ("1μs", 1e-6),
        ("10ns", 1e-8),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("2562047h", 2562047 * 3600.0),
        ("9223372036854775807ns", 9223372036.854776),
        ("-9223372036854775808ns", -9223372036.854776),
        ("0.000000001s", 1e-9),
        ("1.0000000001s", 1.0),  # below a nanosecond is dropped, as in Go
    ],
)
def test_accepted(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("-", 'time: invalid duration "-"'),
        ("1", 'time: missing unit in duration "1"'),
        ("10", 'time: missing unit in duration "10"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1hx", 'time: unknown unit "hx" in duration "1hx"'),
        ("1mss", 'time: unknown unit "mss" in duration "1mss"'),
        ("1h 2m", 'time: unknown unit "h " in duration "1h 2m"'),
        ("1.h5", 'time: missing unit in duration "1.h5"'),
        (".", 'time: invalid duration "."'),
        (".s", 'time: invalid duration ".s"'),
        ("s", 'time: invalid duration "s"'),
        ("invalid", 'time: invalid duration "invalid"'),
        ("1h-2m", 'time: unknown unit "h-" in duration "1h-2m"'),
        ("2562048h", 'time: invalid duration "2562048h"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("99999999999999999999s", 'time: invalid duration "99999999999999999999s"'),
        ("1µx", 'time: unknown unit "\\xc2\\xb5x" in duration "1\\xc2\\xb5x"'),
        ('1"', 'time: unknown unit "\\"" in duration "1\\""'),
    ],
)
def test_rejected_with_gos_wording(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_go_duration(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (1e-9, "1ns"),
        (1.5e-6, "1.5µs"),
        (0.5, "500ms"),
        (1.5, "1.5s"),
        (45.0, "45s"),
        (60.0, "1m0s"),
        (90.0, "1m30s"),
        (3600.0, "1h0m0s"),
        (3661.5, "1h1m1.5s"),
        (36000.0, "10h0m0s"),
        (-90.0, "-1m30s"),
    ],
)
def test_formatting_matches_go(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text


@pytest.mark.parametrize("text", ["10h", "1h30m0s", "1.5s", "500ms", "-2m"])
def test_round_trip(text: str) -> None:
    assert parse_go_duration(format_go_duration(parse_go_duration(text))) == (
        parse_go_duration(text)
    )
