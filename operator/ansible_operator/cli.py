"""The `ansible-operator` command line.

Entry point of the console script and of `python -m ansible_operator`.
Sub-commands: `version` prints our version and those of the libraries that
shape behaviour; `validate` loads watches.yaml and reports; `run` starts the
operator (controller layer); `init` and `create api` write a new project and
its kinds (scaffold layer); `plan` shows what a CR's role would change (plan
layer).

Each sub-command's module is imported when that sub-command runs, not with this
one: the parser needs only the flags (config.options, scaffold.flags,
plan.planflags), and `run` should not load the scaffold's templates or the plan
command, nor `version` the operator (tests/unit/test_startup_imports.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ansible_operator import __version__
from ansible_operator.config import defaults
from ansible_operator.config.options import add_run_arguments, options_from_args
from ansible_operator.config.watches import load_watches, summarize
from ansible_operator.errors import ConfigError
from ansible_operator.plan.planflags import add_plan_parser
from ansible_operator.scaffold.flags import add_create_parser, add_init_parser

# The sub-commands' own modules are imported in main() and _run(), when they run
# (see the module docstring): hence the PLC0415 (import outside the top) below.


def _dist_version(name: str) -> str:
    # importlib.metadata brings email, zipfile and csv: only `version` needs it.
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    parts = {
        "ansible-operator": __version__,
        "ansible-core": _dist_version("ansible-core"),
        "ansible-runner": _dist_version("ansible-runner"),
        "kopf": _dist_version("kopf"),
        "kubernetes": _dist_version("kubernetes"),
        "python": sys.version.split()[0],
    }
    return ", ".join(f'{key}: "{value}"' for key, value in parts.items())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansible-operator",
        description="Run Ansible roles and playbooks for Kubernetes custom resources.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the versions of the operator and its engines")
    validate = sub.add_parser("validate", help="load and check watches.yaml, then summarize it")
    validate.add_argument("--watches-file", default=defaults.WATCHES_FILE)
    run = sub.add_parser("run", help="run the operator")
    add_run_arguments(run)
    add_init_parser(sub)
    add_create_parser(sub)
    add_plan_parser(sub)
    return parser


def _validate(watches_file: str) -> int:
    try:
        watches = load_watches(
            watches_file,
            max_concurrent_reconciles_default=defaults.MAX_CONCURRENT_RECONCILES,
            ansible_verbosity_default=defaults.ANSIBLE_VERBOSITY,
        )
    except ConfigError as err:
        print(f"invalid: {err}", file=sys.stderr)
        return 1
    for watch in watches:
        print(summarize(watch))
    print(f"{watches_file}: {len(watches)} watch(es), valid")
    return 0


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from ansible_operator.controller import manager  # noqa: PLC0415
    from ansible_operator.observability.logging import setup_logging  # noqa: PLC0415
    from ansible_operator.warm import malloc  # noqa: PLC0415
    from ansible_operator.warm.child import exit_like_python  # noqa: PLC0415

    malloc.limit_this_process()  # before any thread allocates: fewer glibc arenas
    try:
        options = options_from_args(args, argv)
        setup_logging(
            encoder=options.zap_encoder,
            level=options.zap_log_level,
            stacktrace_level=options.zap_stacktrace_level,
            time_encoding=options.zap_time_encoding,
            devel=options.zap_devel,
        )
    except (ConfigError, ValueError) as err:
        print(f"ansible-operator: {err}", file=sys.stderr)
        return 1
    for flag in options.ignored:
        logging.getLogger("ansible_operator.cli").warning(
            "flag %s is accepted for compatibility and has no effect here", flag
        )
    code = manager.run(options)
    # Everything the run started is stopped. What is left is the interpreter's
    # teardown of some 900 modules and their objects: 0.2 s to 1.6 s on two busy
    # cores, most of the time from SIGTERM to exit, and it frees nothing the kernel
    # would not. So exit as the interpreter would (threads joined, atexit handlers
    # run, streams flushed), without the teardown (docs/benchmarks.md, "Start-up
    # and resting size").
    return exit_like_python(code)  # never returns


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(arguments)
    if args.command == "version":
        print(version_text())
        return 0
    if args.command == "validate":
        return _validate(args.watches_file)
    if args.command in ("init", "create"):
        from ansible_operator.scaffold import commands as scaffold  # noqa: PLC0415

        return scaffold.run_init(args) if args.command == "init" else scaffold.run_create_api(args)
    if args.command == "plan":
        from ansible_operator.plan import command as plan  # noqa: PLC0415

        return plan.run_plan(args)
    return _run(args, arguments)
