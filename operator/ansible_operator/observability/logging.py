"""Structured logging with the Go operator's zap flags and JSON line format.

Where this sits: the `run` command calls `setup_logging` once, first thing,
with the values of `--zap-encoder`, `--zap-log-level`,
`--zap-stacktrace-level`, `--zap-time-encoding` and `--zap-devel`; a bad
value raises ValueError naming the flag. Every other module logs through
stdlib `logging`; the reconciler wraps its logger with `object_logger` so each
line about a CR carries `namespace`, `name`, `gvk` (and `job` for a run).

Lines go to stderr, one per record, as zap writes them:

    {"level":"info","ts":"2026-01-02T03:04:05Z","logger":"reconciler","msg":"...","name":"x",...}

Secrets stay out by construction: a field is written only when the caller
passed it, and only plain data (str, numbers, bools, None, lists and dicts of
them) is written; any other object, in a field or a %-argument of the
message, becomes `<TypeName>` instead of its str()/repr(), which for API
objects or CR bodies could spell out a Secret. Two exceptions: values of this
package's own types (a work-queue Key, a proxy Touch...) are written with
their str(), which is made for logs; and exceptions are described as in
tracebacks, where Kubernetes API errors are reduced to their status and
reason (their str() includes the response body).
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import traceback
from collections.abc import Mapping, MutableMapping
from datetime import datetime
from typing import Any, Final, TextIO

_OWN_PACKAGE = __name__.partition(".")[0] + "."

__all__ = ["ObjectLogger", "object_logger", "parse_log_level", "setup_logging"]

# zap's named levels as --zap-log-level accepts them (case-insensitive).
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "error": logging.ERROR,
    "panic": logging.CRITICAL,
}
_STACKTRACE_LEVELS: Final = {
    "info": logging.INFO,
    "error": logging.ERROR,
    "panic": logging.CRITICAL,
}
# controller-runtime accepts "nanos"; its help text says "nano". Both work here.
_TIME_ENCODINGS: Final = ("epoch", "millis", "nano", "nanos", "iso8601", "rfc3339", "rfc3339nano")
_ENCODERS: Final = ("json", "console")

_CORE_KEYS: Final = frozenset({"level", "ts", "logger", "msg"})
# Record attribute that carries the fields of an ObjectLogger. Keeping them in
# one attribute lets a field be called "name" or "msg", which LogRecord reserves.
_FIELDS_ATTR: Final = "_log_fields"
_RECORD_ATTRS: Final = frozenset(
    {*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime", "taskName"}
)
_OUR_HANDLER: Final = "_ansible_operator_handler"


def _invalid(flag: str, value: str, accepted: str) -> ValueError:
    return ValueError(f"invalid value {value!r} for {flag}: expected {accepted}")


def parse_log_level(value: str) -> int:
    """The stdlib level for a `--zap-log-level` value.

    Names map to their levels; an integer n > 0 is zap's V(n): 1 is debug and
    each step above enables one more level of detail (levels 9, 8, ... here).
    """
    named = _LEVELS.get(value.strip().lower())
    if named is not None:
        return named
    try:
        verbosity = int(value)
    except ValueError:
        verbosity = 0
    if verbosity <= 0:
        raise _invalid("--zap-log-level", value, "debug, info, error, panic or an integer > 0")
    return max(1, logging.DEBUG + 1 - verbosity)


def _default_level(devel: bool) -> int:
    return logging.DEBUG if devel else logging.INFO


def setup_logging(
    *,
    encoder: str | None = None,
    level: str | None = None,
    stacktrace_level: str | None = None,
    time_encoding: str | None = None,
    devel: bool = False,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every log record to `stream` (stderr) in zap's format; returns the handler.

    None means "flag not given": json / info / error, or with `devel`
    (`--zap-devel`) console / debug / warn, as controller-runtime does;
    explicit values win over `devel`. The time encoding defaults to rfc3339
    (the Go operator's effective default). Calling it again replaces the
    handler it installed before.
    """
    encoder_name = (encoder or ("console" if devel else "json")).lower()
    if encoder_name not in _ENCODERS:
        raise _invalid("--zap-encoder", encoder or "", "json or console")
    threshold = parse_log_level(level) if level is not None else _default_level(devel)
    if stacktrace_level is None:
        stack_threshold = logging.WARNING if devel else logging.ERROR
    else:
        found = _STACKTRACE_LEVELS.get(stacktrace_level.lower())
        if found is None:
            raise _invalid("--zap-stacktrace-level", stacktrace_level, "info, error or panic")
        stack_threshold = found
    time_name = (time_encoding or "rfc3339").lower()
    if time_name not in _TIME_ENCODINGS:
        raise _invalid("--zap-time-encoding", time_encoding or "", ", ".join(_TIME_ENCODINGS))

    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        ZapFormatter(
            console=encoder_name == "console", time_encoding=time_name, stack=stack_threshold
        )
    )
    handler.addFilter(_RetriedRequestFilter(threshold))
    setattr(handler, _OUR_HANDLER, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OUR_HANDLER, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
    return handler


class _RetriedRequestFilter(logging.Filter):
    """kopf logs every failed API request it is about to retry at error level, with our
    stack trace: right after an API server starts, its first LISTs get HTTP 429
    "storage is (re)initializing" and the operator's first lines looked like a crash.
    A request that will be retried is a warning (no stack trace); the last attempt
    ("escalating") stays an error."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.ERROR
            and record.name.startswith("kopf.")
            and isinstance(record.msg, str)
            and record.msg.startswith("Request attempt ")
            and "; will retry: " in record.msg
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            return record.levelno >= self.threshold
        return True


class ZapFormatter(logging.Formatter):
    """Formats a record as one zap JSON (or console) line; never calls str() on foreign objects."""

    def __init__(self, *, console: bool, time_encoding: str, stack: int) -> None:
        super().__init__()
        self._console = console
        self._time_encoding = time_encoding
        self._stack_threshold = stack

    def format(self, record: logging.LogRecord) -> str:
        fields = _record_fields(record)
        stacktrace = ""
        if record.exc_info and record.exc_info[1] is not None:
            error = _describe_exception(record.exc_info[1])
            fields["exception" if "error" in fields else "error"] = error
            if record.levelno >= self._stack_threshold:
                stacktrace = "".join(traceback.format_tb(record.exc_info[2])).rstrip()
        elif record.stack_info:
            stacktrace = record.stack_info
        elif record.levelno >= self._stack_threshold:
            stacktrace = _caller_stack()
        timestamp = _encode_time(record.created, self._time_encoding)
        message = _safe_message(record)
        if self._console:
            return _console_line(record, timestamp, message, fields, stacktrace)
        line: dict[str, Any] = {"level": _level_name(record.levelno), "ts": timestamp}
        if record.name != "root":  # zap omits the key for an unnamed logger
            line["logger"] = record.name
        line["msg"] = message
        line.update(fields)
        if stacktrace:
            line["stacktrace"] = stacktrace
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def _console_line(
    record: logging.LogRecord,
    timestamp: float | int | str,
    message: str,
    fields: Mapping[str, Any],
    stacktrace: str,
) -> str:
    parts = [str(timestamp), _level_name(record.levelno).upper()]
    if record.name != "root":
        parts.append(record.name)
    parts.append(message)
    if fields:
        parts.append(json.dumps(fields, ensure_ascii=False))
    line = "\t".join(parts)
    return f"{line}\n{stacktrace}" if stacktrace else line


def _level_name(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "panic"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warn"
    if levelno >= logging.INFO:
        return "info"
    if levelno >= logging.DEBUG:
        return "debug"
    return f"Level({levelno - logging.DEBUG - 1})"  # zap's name for V(2) and up: Level(-2)


def _encode_time(created: float, encoding: str) -> float | int | str:
    seconds = int(created)
    nanos = min(999_999_999, round((created - seconds) * 1e9))
    if encoding == "epoch":
        return seconds + nanos / 1e9
    if encoding == "millis":
        return seconds * 1e3 + nanos / 1e6
    if encoding in {"nano", "nanos"}:
        return seconds * 1_000_000_000 + nanos
    local = datetime.fromtimestamp(seconds).astimezone()
    base = local.strftime("%Y-%m-%dT%H:%M:%S")
    offset = local.utcoffset()
    minutes = 0 if offset is None else int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    if encoding == "iso8601":
        zone = "Z" if minutes == 0 else f"{sign}{hours:02d}{mins:02d}"
        return f"{base}.{nanos // 1_000_000:03d}{zone}"
    zone = "Z" if minutes == 0 else f"{sign}{hours:02d}:{mins:02d}"
    if encoding == "rfc3339nano" and nanos:
        return f"{base}.{nanos:09d}".rstrip("0") + zone
    return base + zone


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    attached = getattr(record, _FIELDS_ATTR, None)
    if isinstance(attached, Mapping):
        fields.update(attached)
    for key, value in vars(record).items():
        if key not in _RECORD_ATTRS and key != _FIELDS_ATTR:
            fields[key] = value
    # Fields never overwrite the four keys every line starts with.
    return {
        (f"field.{key}" if key in _CORE_KEYS else str(key)): _plain(value)
        for key, value in fields.items()
    }


def _plain(value: object, depth: int = 0) -> Any:
    """`value` if it is plain data, else a placeholder naming its type (never its contents)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 10 and isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    if depth < 10 and isinstance(value, Mapping):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    return f"<{type(value).__name__}>"


def _safe_message(record: logging.LogRecord) -> str:
    if not isinstance(record.msg, str):
        return f"<{type(record.msg).__name__}>"
    if not record.args:
        return record.msg
    args: object
    if isinstance(record.args, Mapping):
        args = {key: _scalar(value) for key, value in record.args.items()}
    else:
        args = tuple(_scalar(value) for value in record.args)
    try:
        return record.msg % args
    except (TypeError, ValueError, KeyError):
        return f"{record.msg} <arguments not formatted>"


def _scalar(value: object) -> object:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseException):
        return _describe_exception(value)
    if type(value).__module__.startswith(_OWN_PACKAGE):
        # Our own values (Key, Touch, GVK, RequestInfo...): their str() is
        # written for logs and never holds a CR's body or a credential.
        return str(value)
    return f"<{type(value).__name__}>"


def _describe_exception(error: BaseException) -> str:
    name = type(error).__name__
    status, reason = getattr(error, "status", None), getattr(error, "reason", None)
    if isinstance(status, int) and hasattr(error, "body"):
        # kubernetes ApiException: its str() appends headers and the response body.
        return f"{name}: ({status}) {reason}"
    if isinstance(error, subprocess.CalledProcessError):
        # The command line may hold credentials (e.g. --ansible-args); the code is enough.
        return f"{name}: command exited with status {error.returncode}"
    return f"{name}: {error}"


def _caller_stack() -> str:
    frames = traceback.extract_stack()
    internal = {logging.__file__, __file__}
    while frames and frames[-1].filename in internal:
        frames.pop()
    return "".join(traceback.format_list(frames)).rstrip()


class ObjectLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed fields (namespace, name, gvk, job...) to every line.

    Per-call `extra` is merged over the fixed fields (the stdlib adapter would
    replace them).
    """

    def __init__(self, logger: logging.Logger, fields: Mapping[str, object]) -> None:
        super().__init__(logger, dict(fields))
        self.fields: Mapping[str, object] = dict(fields)

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = kwargs.get("extra") or {}
        kwargs["extra"] = {_FIELDS_ATTR: {**self.fields, **extra}}
        return msg, kwargs


def object_logger(
    logger: logging.Logger | logging.LoggerAdapter[Any],
    *,
    namespace: str,
    name: str,
    gvk: str,
    **fields: object,
) -> ObjectLogger:
    """`logger` with `namespace`, `name`, `gvk` and `fields` on every line it writes.

    Wrapping another adapter keeps that adapter's fields (ours win on clashes).
    """
    inherited: dict[str, object] = {}
    base: logging.Logger | logging.LoggerAdapter[Any] = logger
    while isinstance(base, logging.LoggerAdapter):
        outer = base.fields if isinstance(base, ObjectLogger) else (base.extra or {})
        inherited = {**outer, **inherited}
        base = base.logger
    return ObjectLogger(
        base, {**inherited, "namespace": namespace, "name": name, "gvk": gvk, **fields}
    )
