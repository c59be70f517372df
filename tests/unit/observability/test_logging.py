"""Unit tests of observability.logging: the zap flags, the JSON/console line format,
per-object fields, and that foreign objects never reach the output."""

from __future__ import annotations

import io
import json
import logging
import math
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from ansible_operator.controller.contract import Key
from ansible_operator.errors import KubeUnavailable
from ansible_operator.observability.logging import (
    ObjectLogger,
    object_logger,
    parse_log_level,
    setup_logging,
)
from ansible_operator.proxy.ownership import Touch

GVK = "cache.example.com/v1alpha1, Kind=Memcached"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$")


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield io.StringIO()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def only_line(stream: io.StringIO) -> dict[str, Any]:
    [line] = lines(stream)
    return line


def test_default_is_json_lines_in_zap_key_order(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    logging.getLogger("reconciler").info("Reconciling", extra={"request": "ns/a", "attempt": 2})
    line = only_line(stream)
    assert list(line) == ["level", "ts", "logger", "msg", "request", "attempt"]
    assert line["level"] == "info"
    assert RFC3339.match(line["ts"]), line["ts"]
    assert (line["logger"], line["msg"], line["request"], line["attempt"]) == (
        "reconciler",
        "Reconciling",
        "ns/a",
        2,
    )


def test_the_root_logger_has_no_logger_key(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    logging.getLogger().warning("careful")
    assert only_line(stream) == {"level": "warn", "ts": only_line(stream)["ts"], "msg": "careful"}


def test_info_level_hides_debug(stream: io.StringIO) -> None:
    setup_logging(stream=stream, level="info")
    log = logging.getLogger("x")
    log.debug("hidden")
    log.info("shown")
    assert [line["msg"] for line in lines(stream)] == ["shown"]


def test_error_level_hides_info(stream: io.StringIO) -> None:
    setup_logging(stream=stream, level="ERROR")
    log = logging.getLogger("x")
    log.warning("hidden")
    log.error("shown")
    assert [(line["level"], line["msg"]) for line in lines(stream)] == [("error", "shown")]


def test_integer_levels_enable_zap_v_levels(stream: io.StringIO) -> None:
    setup_logging(stream=stream, level="2")
    log = logging.getLogger("x")
    log.debug("v1")
    log.log(parse_log_level("2"), "v2")
    log.log(parse_log_level("3"), "v3 hidden")
    assert [(line["level"], line["msg"]) for line in lines(stream)] == [
        ("debug", "v1"),
        ("Level(-2)", "v2"),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("debug", 10), ("Info", 20), ("error", 40), ("panic", 50), ("1", 10), ("2", 9), ("5", 6)],
)
def test_parse_log_level(value: str, expected: int) -> None:
    assert parse_log_level(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "verbose", "", "1.5", "warn"])
def test_bad_log_level_names_the_flag_and_the_choices(value: str) -> None:
    with pytest.raises(ValueError, match="--zap-log-level") as caught:
        parse_log_level(value)
    assert "debug, info, error, panic or an integer > 0" in str(caught.value)


@pytest.mark.parametrize(
    ("option", "flag"),
    [
        ({"encoder": "xml"}, "--zap-encoder"),
        ({"stacktrace_level": "debug"}, "--zap-stacktrace-level"),
        ({"time_encoding": "unix"}, "--zap-time-encoding"),
        ({"level": "0"}, "--zap-log-level"),
    ],
)
def test_bad_flag_values_raise_value_error(
    stream: io.StringIO, option: dict[str, Any], flag: str
) -> None:
    with pytest.raises(ValueError, match=flag):
        setup_logging(stream=stream, **option)


@pytest.mark.parametrize(
    ("encoding", "check"),
    [
        ("epoch", lambda ts: isinstance(ts, float) and 1e9 < ts < 1e11),
        ("millis", lambda ts: isinstance(ts, float) and 1e12 < ts < 1e14),
        ("nano", lambda ts: isinstance(ts, int) and 1e18 < ts < 1e20),
        ("nanos", lambda ts: isinstance(ts, int) and 1e18 < ts < 1e20),
        ("rfc3339", RFC3339.match),
        (
            "rfc3339nano",
            lambda ts: re.match(
                r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$", ts
            ),
        ),
        (
            "ISO8601",
            lambda ts: re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4})$", ts),
        ),
    ],
)
def test_time_encodings(stream: io.StringIO, encoding: str, check: Any) -> None:
    setup_logging(stream=stream, time_encoding=encoding)
    logging.getLogger("x").info("t")
    ts = only_line(stream)["ts"]
    assert check(ts), ts


def test_console_encoder_is_tab_separated_with_json_fields(stream: io.StringIO) -> None:
    setup_logging(stream=stream, encoder="console")
    logging.getLogger("cmd").info("Version", extra={"version": "0.1.0"})
    ts, level, logger, msg, fields = stream.getvalue().rstrip("\n").split("\t")
    assert RFC3339.match(ts)
    assert (level, logger, msg, json.loads(fields)) == (
        "INFO",
        "cmd",
        "Version",
        {"version": "0.1.0"},
    )


def test_devel_means_console_and_debug(stream: io.StringIO) -> None:
    setup_logging(stream=stream, devel=True)
    logging.getLogger("x").debug("dev")
    assert "\tDEBUG\tx\tdev" in stream.getvalue()


def test_explicit_flags_win_over_devel(stream: io.StringIO) -> None:
    setup_logging(stream=stream, devel=True, encoder="json")
    logging.getLogger("x").debug("dev")
    assert only_line(stream)["level"] == "debug"


def test_error_lines_carry_the_callers_stack(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    log = logging.getLogger("x")
    log.info("no stack")
    log.error("with stack")
    info, error = lines(stream)
    assert "stacktrace" not in info
    assert list(error)[-1] == "stacktrace"
    last_frame = error["stacktrace"].splitlines()[-2]
    assert "in test_error_lines_carry_the_callers_stack" in last_frame


def test_stacktrace_level_info(stream: io.StringIO) -> None:
    setup_logging(stream=stream, stacktrace_level="info")
    logging.getLogger("x").info("with stack")
    assert "test_stacktrace_level_info" in only_line(stream)["stacktrace"]


def test_exceptions_give_error_and_traceback(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("x").exception("Failed")
    line = only_line(stream)
    assert line["error"] == "ValueError: boom"
    assert 'raise ValueError("boom")' in line["stacktrace"]


def test_api_errors_are_reduced_to_status_and_reason(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    error = ApiException(status=403, reason="Forbidden", body='{"password":"hunter2"}')
    logging.getLogger("x").warning("Denied", exc_info=error)
    line = only_line(stream)
    assert line["error"] == "ApiException: (403) Forbidden"
    assert "hunter2" not in stream.getvalue()


def test_failed_commands_do_not_log_their_command_line(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    error = subprocess.CalledProcessError(2, ["ansible-runner", "--password", "hunter2"])
    logging.getLogger("x").error("Run failed", exc_info=error)
    assert only_line(stream)["error"] == "CalledProcessError: command exited with status 2"
    assert "hunter2" not in stream.getvalue()


class Leaky:
    """An object whose str() and repr() would reveal a secret."""

    def __str__(self) -> str:
        return "password=hunter2"

    __repr__ = __str__


def test_foreign_objects_never_reach_the_output(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    log = logging.getLogger("x")
    log.info("object %s and %d", Leaky(), 3)
    log.info("fields", extra={"obj": Leaky(), "data": {"k": [1, "v", None, Leaky()]}})
    log.info(Leaky())
    log.info("named %(a)s", {"a": Leaky()})
    first, second, third, fourth = lines(stream)
    assert first["msg"] == "object <Leaky> and 3"
    assert second["obj"] == "<Leaky>"
    assert second["data"] == {"k": [1, "v", None, "<Leaky>"]}
    assert third["msg"] == "<Leaky>"
    assert fourth["msg"] == "named <Leaky>"
    assert "hunter2" not in stream.getvalue()


def test_own_values_and_errors_are_logged_by_their_str(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    log = logging.getLogger("x")
    touch = Touch("apps", "v1", "Deployment", "deployments", "ns1", "web", False, True)
    log.info("Resource will not be watched/cached (%s): %s", "blacklisted", touch)
    log.info("Retrying %s", Key("memcached-v1alpha1-controller", "ns1", "mc"))
    log.info("failed: %s", KubeUnavailable("HTTP 503: etcd is down"))
    first, second, third = (line["msg"] for line in lines(stream))
    assert (
        first == "Resource will not be watched/cached (blacklisted): apps/v1 Deployment web in ns1"
    )
    assert second == "Retrying memcached-v1alpha1-controller ns1/mc"
    assert third == "failed: KubeUnavailable: HTTP 503: etcd is down"


def test_a_bad_format_string_still_logs(stream: io.StringIO) -> None:
    handler = setup_logging(stream=stream)
    # Not through the root logger: pytest's capture handler there would format
    # the record the stdlib way and fail on the very mistake tested here.
    log = logging.getLogger("isolated")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.info("%d items", Leaky())
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert only_line(stream)["msg"] == "%d items <arguments not formatted>"


def test_non_finite_numbers_keep_the_line_valid_json(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    logging.getLogger("x").info("n", extra={"ratio": math.nan, "limit": math.inf})
    line = only_line(stream)
    assert (line["ratio"], line["limit"]) == ("nan", "inf")


def test_object_logger_adds_fields_to_every_line(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    log = object_logger(logging.getLogger("reconciler"), namespace="ns", name="a", gvk=GVK)
    log.info("one")
    object_logger(log, namespace="ns", name="a", gvk=GVK, job="42").warning(
        "two", extra={"attempt": 1}
    )
    log.error("three", extra={"name": "override"})
    one, two, three = lines(stream)
    assert {k: one[k] for k in ("namespace", "name", "gvk")} == {
        "namespace": "ns",
        "name": "a",
        "gvk": GVK,
    }
    assert list(one)[:4] == ["level", "ts", "logger", "msg"]
    assert (two["job"], two["attempt"], two["name"]) == ("42", 1, "a")
    assert "job" not in three  # the wrapping logger is a new one
    assert three["name"] == "override"  # per-call extra wins, even for reserved names


def test_object_logger_keeps_fields_of_wrapped_adapters(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    base = logging.LoggerAdapter(logging.getLogger("x"), {"controller": "c"})
    outer = object_logger(base, namespace="ns", name="a", gvk=GVK, job="7")
    inner = object_logger(outer, namespace="ns2", name="b", gvk=GVK)
    assert isinstance(inner, ObjectLogger)
    assert inner.logger is logging.getLogger("x")
    inner.info("nested")
    line = only_line(stream)
    assert (line["controller"], line["job"], line["namespace"], line["name"]) == (
        "c",
        "7",
        "ns2",
        "b",
    )


def test_fields_cannot_replace_the_core_keys(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    log = ObjectLogger(logging.getLogger("x"), {"level": "fake", "msg": "fake"})
    log.info("real")
    line = only_line(stream)
    assert (line["level"], line["msg"]) == ("info", "real")
    assert (line["field.level"], line["field.msg"]) == ("fake", "fake")


def test_setting_up_twice_replaces_the_handler(stream: io.StringIO) -> None:
    first = setup_logging(stream=stream)
    second = setup_logging(stream=stream, level="debug")
    root = logging.getLogger()
    assert first not in root.handlers
    assert second in root.handlers
    logging.getLogger("x").info("once")
    assert len(lines(stream)) == 1


RETRY = (
    "Request attempt #1/9 failed; will retry: GET https://127.0.0.1:6443/apis/x/v1/ys"
    " -> APITooManyRequestsError('storage is (re)initializing')"
)


@pytest.mark.parametrize(
    ("logger", "message", "level", "expected"),
    [
        pytest.param("kopf._cogs.clients.watching", RETRY, "info", ("warn", False), id="retry"),
        pytest.param("kopf._cogs.clients.watching", RETRY, "error", None, id="retry-hidden"),
        pytest.param(
            "kopf._cogs.clients.api",
            "Request attempt #9/9 failed; escalating: GET https://x -> APIServerError()",
            "info",
            ("error", True),
            id="last-attempt",
        ),
        pytest.param("reconciler", RETRY, "info", ("error", True), id="not-kopf"),
        pytest.param("kopf.objects", "Handler failed", "info", ("error", True), id="other-kopf"),
    ],
)
def test_api_requests_kopf_retries_are_warnings(
    stream: io.StringIO, logger: str, message: str, level: str, expected: tuple[str, bool] | None
) -> None:
    setup_logging(stream=stream, level=level)
    logging.getLogger(logger).error(message)
    if expected is None:
        assert lines(stream) == []
        return
    line = only_line(stream)
    assert (line["level"], "stacktrace" in line) == expected
    assert line["msg"] == message
