"""The `ansible-operator run` flags and environment, parsed into `RunOptions`.

Called by the cli module. Flag names, value syntax and defaults are the Go
operator's (docs/cli.md), so an existing Deployment's args work unchanged:
booleans as `--flag`, `--flag=true|false`; durations as Go durations ("10h",
"30s"). Flags that mean nothing here are accepted and logged as ignored
(docs/cli.md lists them), never a crash. Defaults come from config.defaults.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ansible_operator.config import defaults
from ansible_operator.config.durations import DurationError, parse_go_duration
from ansible_operator.errors import ConfigError

log = logging.getLogger("ansible_operator.config")

_TRUE = {"1", "t", "true", "yes", "y", "on"}
_FALSE = {"0", "f", "false", "no", "n", "off"}

#: Accepted for compatibility; they change nothing here (see docs/cli.md).
IGNORED_FLAGS = (
    "metrics_secure",
    "metrics_require_rbac",
    "enable_http2",
    "leader_elect_resource_lock",
)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r} (use true or false)")


def _duration(text: str) -> float:
    try:
        return parse_go_duration(text)
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


@dataclass(frozen=True)
class RunOptions:
    watches_file: str = defaults.WATCHES_FILE
    reconcile_period: float = defaults.RECONCILE_PERIOD
    max_concurrent_reconciles: int = defaults.MAX_CONCURRENT_RECONCILES
    max_concurrent_reconciles_total: int = defaults.MAX_CONCURRENT_RECONCILES_TOTAL
    ansible_verbosity: int = defaults.ANSIBLE_VERBOSITY
    ansible_args: str = defaults.ANSIBLE_ARGS
    ansible_log_events: str = defaults.ANSIBLE_LOG_EVENTS
    ansible_roles_path: str = defaults.ANSIBLE_ROLES_PATH
    ansible_collections_path: str = defaults.ANSIBLE_COLLECTIONS_PATH
    ansible_run_timeout: float = defaults.ANSIBLE_RUN_TIMEOUT
    inject_owner_ref: bool = defaults.INJECT_OWNER_REF
    leader_elect: bool = defaults.LEADER_ELECT
    leader_election_id: str = defaults.LEADER_ELECTION_ID
    leader_election_namespace: str = defaults.LEADER_ELECTION_NAMESPACE
    leader_elect_lease_duration: float = defaults.LEADER_ELECT_LEASE_DURATION
    leader_elect_renew_deadline: float = defaults.LEADER_ELECT_RENEW_DEADLINE
    leader_elect_retry_period: float = defaults.LEADER_ELECT_RETRY_PERIOD
    sharding: bool = defaults.SHARDING
    metrics_bind_address: str = defaults.METRICS_BIND_ADDRESS
    health_probe_bind_address: str = defaults.HEALTH_PROBE_BIND_ADDRESS
    graceful_shutdown_timeout: float = defaults.GRACEFUL_SHUTDOWN_TIMEOUT
    proxy_port: int = defaults.PROXY_PORT
    user_metrics_bind_address: str = defaults.USER_METRICS_BIND_ADDRESS
    runner_dir: str = defaults.RUNNER_DIR_ROOT
    warm_ansible: bool = defaults.WARM_ANSIBLE
    reconcile_all_at_start: bool = defaults.RECONCILE_ALL_AT_START
    warm_idle_timeout: float = defaults.WARM_IDLE_TIMEOUT
    running_condition_delay: float = defaults.RUNNING_CONDITION_DELAY
    ansible_compat: bool = defaults.ANSIBLE_COMPAT == defaults.ANSIBLE_COMPAT_ON
    zap_encoder: str = "json"
    zap_log_level: str = "info"
    zap_stacktrace_level: str = "error"
    zap_time_encoding: str = "rfc3339"
    zap_devel: bool = False
    namespaces: tuple[str, ...] = ()  # from WATCH_NAMESPACE; empty = all namespaces
    ignored: tuple[str, ...] = field(default=())


def _add_bool(parser: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
    parser.add_argument(name, type=_bool, nargs="?", const=True, default=default, help=help)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    d = defaults
    add = parser.add_argument
    add("--watches-file", default=d.WATCHES_FILE, help="path to watches.yaml")
    add("--reconcile-period", type=_duration, default=d.RECONCILE_PERIOD, help="Go duration")
    add("--max-concurrent-reconciles", type=int, default=d.MAX_CONCURRENT_RECONCILES)
    add("--max-concurrent-reconciles-total", type=int, default=d.MAX_CONCURRENT_RECONCILES_TOTAL)
    add("--ansible-verbosity", type=int, default=d.ANSIBLE_VERBOSITY)
    add("--ansible-args", default=d.ANSIBLE_ARGS)
    add("--ansible-log-events", default=d.ANSIBLE_LOG_EVENTS, help="Tasks, Everything or Nothing")
    add("--ansible-roles-path", default=d.ANSIBLE_ROLES_PATH)
    add("--ansible-collections-path", default=d.ANSIBLE_COLLECTIONS_PATH)
    add("--ansible-run-timeout", type=_duration, default=d.ANSIBLE_RUN_TIMEOUT, help="0 = none")
    _add_bool(parser, "--inject-owner-ref", d.INJECT_OWNER_REF, "own objects roles create")
    _add_bool(parser, "--leader-elect", d.LEADER_ELECT, "use a Lease so only one replica works")
    _add_bool(parser, "--enable-leader-election", False, "deprecated alias of --leader-elect")
    add("--leader-election-id", default=d.LEADER_ELECTION_ID)
    add("--leader-election-namespace", default=d.LEADER_ELECTION_NAMESPACE)
    add("--leader-elect-lease-duration", type=_duration, default=d.LEADER_ELECT_LEASE_DURATION)
    add("--leader-elect-renew-deadline", type=_duration, default=d.LEADER_ELECT_RENEW_DEADLINE)
    add("--leader-elect-retry-period", type=_duration, default=d.LEADER_ELECT_RETRY_PERIOD)
    parser.add_argument(
        "--sharding",
        type=_bool,
        nargs="?",
        const=True,
        default=None,
        help=f"replicas share the CRs (default: ${defaults.SHARDING_ENV}, else false)",
    )
    add("--leader-elect-resource-lock", default="leases", help="ignored: always leases")
    add("--metrics-bind-address", default=None, help=f'default "{d.METRICS_BIND_ADDRESS}"')
    add("--metrics-addr", default=None, help="deprecated alias of --metrics-bind-address")
    _add_bool(parser, "--metrics-secure", d.METRICS_SECURE, "ignored (see docs/cli.md)")
    _add_bool(parser, "--metrics-require-rbac", d.METRICS_REQUIRE_RBAC, "ignored")
    _add_bool(parser, "--enable-http2", d.ENABLE_HTTP2, "ignored")
    add("--health-probe-bind-address", default=d.HEALTH_PROBE_BIND_ADDRESS)
    add("--graceful-shutdown-timeout", type=_duration, default=d.GRACEFUL_SHUTDOWN_TIMEOUT)
    add("--proxy-port", type=int, default=d.PROXY_PORT, help="0 = any free port")
    add("--user-metrics-bind-address", default=d.USER_METRICS_BIND_ADDRESS, help="for osdk_metric")
    add("--runner-dir", default=d.RUNNER_DIR_ROOT, help="root of per-CR ansible-runner dirs")
    add("--zap-encoder", default="json", choices=["json", "console"])
    add("--zap-log-level", default="info")
    add("--zap-stacktrace-level", default="error")
    add("--zap-time-encoding", default="rfc3339")
    _add_bool(parser, "--zap-devel", False, "console encoder, debug level")
    _add_ours(parser)


def _add_ours(parser: argparse.ArgumentParser) -> None:
    """Flags the Go operator does not have (docs/cli.md marks them new)."""
    d = defaults
    _add_bool(parser, "--warm-ansible", d.WARM_ANSIBLE, "fork Ansible from warm interpreters")
    parser.add_argument(
        "--warm-idle-timeout",
        type=_duration,
        default=d.WARM_IDLE_TIMEOUT,
        help="stop the warm servers after this long without runs (Go duration; 0: never)",
    )
    parser.add_argument(
        "--running-condition-delay",
        type=_duration,
        default=d.RUNNING_CONDITION_DELAY,
        help="write Running only if a run lasts this long (Go duration; 0: always first)",
    )
    _add_bool(
        parser,
        "--reconcile-all-at-start",
        d.RECONCILE_ALL_AT_START,
        "run every CR at start-up, as the Go operator does, not only changed ones",
    )
    add_compat_argument(parser)


def add_compat_argument(parser: argparse.ArgumentParser) -> None:
    """`--ansible-compat`, shared by `run` and `plan` (docs/porting.md)."""
    parser.add_argument(
        "--ansible-compat",
        default=None,
        help=f"ansible-core 2.18 compatibility mode: {defaults.ANSIBLE_COMPAT_ON} or "
        f"{defaults.ANSIBLE_COMPAT_OFF} (default: ${defaults.ANSIBLE_COMPAT_ENV}, "
        f"else {defaults.ANSIBLE_COMPAT})",
    )


def ansible_compat(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    """Whether the 2.18 compatibility mode is on: the flag, else the environment, else
    the default. A bad value is a ConfigError naming where it came from."""
    if args.ansible_compat is not None:
        return _compat_value(args.ansible_compat, source="--ansible-compat")
    raw = environ.get(defaults.ANSIBLE_COMPAT_ENV, "")
    if raw.strip():
        return _compat_value(raw, source=f"environment variable {defaults.ANSIBLE_COMPAT_ENV}")
    return _compat_value(defaults.ANSIBLE_COMPAT, source="config.defaults.ANSIBLE_COMPAT")


def _compat_value(value: str, *, source: str) -> bool:
    """`2.18` is on, `off` is off; anything else is an error naming `source`."""
    text = value.strip().lower()
    if text == defaults.ANSIBLE_COMPAT_ON:
        return True
    if text == defaults.ANSIBLE_COMPAT_OFF:
        return False
    raise ConfigError(
        f"{source}: invalid value {value!r} "
        f"(use {defaults.ANSIBLE_COMPAT_ON} or {defaults.ANSIBLE_COMPAT_OFF})"
    )


def _namespaces(environ: Mapping[str, str]) -> tuple[str, ...]:
    raw = environ.get("WATCH_NAMESPACE", "")
    return tuple(ns.strip() for ns in raw.split(",") if ns.strip())


def _sharding(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    if args.sharding is not None:
        return bool(args.sharding)
    raw = environ.get(defaults.SHARDING_ENV, "")
    if not raw.strip():
        return defaults.SHARDING
    try:
        return _bool(raw)
    except argparse.ArgumentTypeError:
        raise ConfigError(
            f"environment variable {defaults.SHARDING_ENV}: invalid boolean value {raw!r} "
            "(use true or false)"
        ) from None


def _validate(args: argparse.Namespace, argv: Sequence[str]) -> None:
    given = {a.split("=", 1)[0] for a in argv}
    if {"--leader-elect", "--enable-leader-election"} <= given:
        raise ConfigError("only one of --leader-elect and --enable-leader-election may be set")
    if {"--metrics-addr", "--metrics-bind-address"} <= given:
        raise ConfigError("only one of --metrics-addr and --metrics-bind-address may be set")
    if args.metrics_require_rbac and not args.metrics_secure:
        raise ConfigError(
            "--metrics-secure flag is required when --metrics-require-rbac is present"
        )
    if args.ansible_log_events.lower() not in {"tasks", "everything", "nothing"}:
        log.warning(
            "--ansible-log-events flag value '%s' not recognized. "
            "Must be one of: Tasks, Everything, Nothing",
            args.ansible_log_events,
        )


def _election_id(flag: str, env: Mapping[str, str]) -> str:
    """--leader-election-id, else the deprecated OPERATOR_NAME, as the Go operator reads them."""
    if not env.get("OPERATOR_NAME"):
        return flag
    if flag:
        log.info("Ignoring OPERATOR_NAME environment variable since --leader-election-id is set")
        return flag
    log.warning(
        "Environment variable OPERATOR_NAME has been deprecated, use --leader-election-id instead."
    )
    return env["OPERATOR_NAME"]


def options_from_args(
    args: argparse.Namespace, argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> RunOptions:
    """RunOptions from parsed flags plus the environment (WATCH_NAMESPACE, OPERATOR_NAME)."""
    env = os.environ if environ is None else environ
    _validate(args, argv)
    election_id = _election_id(args.leader_election_id, env)
    given = {a.split("=", 1)[0] for a in argv}
    ignored = tuple(
        "--" + name.replace("_", "-")
        for name in IGNORED_FLAGS
        if "--" + name.replace("_", "-") in given
    )
    log_events = args.ansible_log_events.lower()
    return RunOptions(
        watches_file=args.watches_file,
        reconcile_period=args.reconcile_period,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        max_concurrent_reconciles_total=max(1, args.max_concurrent_reconciles_total),
        ansible_verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        ansible_log_events=log_events if log_events in {"everything", "nothing"} else "tasks",
        ansible_roles_path=args.ansible_roles_path,
        ansible_collections_path=args.ansible_collections_path,
        ansible_run_timeout=args.ansible_run_timeout,
        inject_owner_ref=args.inject_owner_ref,
        leader_elect=bool(args.leader_elect or args.enable_leader_election),
        leader_election_id=election_id,
        leader_election_namespace=args.leader_election_namespace,
        leader_elect_lease_duration=args.leader_elect_lease_duration,
        leader_elect_renew_deadline=args.leader_elect_renew_deadline,
        leader_elect_retry_period=args.leader_elect_retry_period,
        sharding=_sharding(args, env),
        metrics_bind_address=args.metrics_bind_address
        or args.metrics_addr
        or defaults.METRICS_BIND_ADDRESS,
        health_probe_bind_address=args.health_probe_bind_address,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        proxy_port=args.proxy_port,
        user_metrics_bind_address=args.user_metrics_bind_address,
        runner_dir=args.runner_dir,
        warm_ansible=args.warm_ansible,
        reconcile_all_at_start=args.reconcile_all_at_start,
        warm_idle_timeout=max(0.0, args.warm_idle_timeout),
        running_condition_delay=max(0.0, args.running_condition_delay),
        ansible_compat=ansible_compat(args, env),
        zap_encoder="console" if args.zap_devel else args.zap_encoder,
        zap_log_level="debug"
        if args.zap_devel and args.zap_log_level == "info"
        else args.zap_log_level,
        zap_stacktrace_level=args.zap_stacktrace_level,
        zap_time_encoding=args.zap_time_encoding,
        zap_devel=args.zap_devel,
        namespaces=_namespaces(env),
        ignored=ignored,
    )
