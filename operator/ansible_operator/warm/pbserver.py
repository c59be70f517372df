"""The warm playbook helper: `ansible-playbook` runs forked from a warm interpreter.

Where this sits: started by supervisor.py as
`python -m ansible_operator.warm.pbserver --socket <dir>/playbook.sock`; reached by
the `ansible-playbook` shim (client.playbook_main) that runner/ansible.py puts first
on the run's PATH. Each run child executes the real `ansible-playbook` script (next
to this interpreter) as `__main__`, exactly as a cold exec would, after taking over
the run's environment, cwd, stdio and TMPDIR (child.py).

Only `preimports.PLAYBOOK_PREIMPORTS` is imported beforehand: nothing that imports
`ansible.constants`, so every run reads its own ansible.cfg, ANSIBLE_* variables,
roles path and verbosity. The server refuses to start otherwise. Besides imports it
parses the collection routing files once (routingprime.py), keyed by their content.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import NoReturn

from ansible_operator.config import defaults
from ansible_operator.errors import WarmStartError
from ansible_operator.warm import (
    bootstrap,
    child,
    configkey,
    forkserver,
    payloadcache,
    primed,
    routingprime,
)
from ansible_operator.warm.preimports import PLAYBOOK_FORBIDDEN, PLAYBOOK_PREIMPORTS
from ansible_operator.warm.protocol import Request

__all__ = ["PRIMED_ENV", "main", "real_playbook"]

PRIMED_ENV = "AO_WARM_PRIMED_CHILDREN"
"""Overrides defaults.WARM_PRIMED_CHILDREN for the helper (0: no primed children)."""


def real_playbook(python: str = sys.executable) -> str:
    """The `ansible-playbook` script installed next to `python`."""
    return os.path.join(os.path.dirname(python), "ansible-playbook")


def _run_playbook(fds: list[int], request: Request, *, base_path: list[str]) -> NoReturn:
    script = real_playbook()
    child.become_fresh(fds, request, base_path=base_path, main_dir=os.path.dirname(script))
    primed.after_fork()  # forked from a primed child: its per-run settings, its display
    # Ansible forks a worker per task: what the run child built up to then (its
    # configuration, the parsed play) goes out of the collector's reach first, so a
    # collection in the worker writes to none of those pages (copy-on-write).
    os.register_at_fork(before=gc.freeze)
    payloadcache.install(os.environ)  # payloads shared across runs, hooked on Ansible's own import
    sys.argv = [request.argv0, *request.argv]
    with open(script, "rb") as handle:
        # dont_inherit: our own `from __future__` imports must not leak into it.
        code = compile(handle.read(), script, "exec", dont_inherit=True)
    child.run_main(code, filename=script)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        started = bootstrap.start(
            sys.argv[1:] if argv is None else argv,
            preimports=PLAYBOOK_PREIMPORTS,
            forbidden=PLAYBOOK_FORBIDDEN,
        )
    except WarmStartError as error:
        sys.exit(f"warm playbook helper: {error}")
    routingprime.prime()  # ansible.builtin's routing file: parsed here, not in every run
    base_path = started.base_path

    def run_child(fds: list[int], request: Request) -> NoReturn:
        _run_playbook(fds, request, base_path=base_path)

    forkserver.serve(
        socket_path=started.socket_path,
        child_main=run_child,
        name="playbook",
        router=_primed_children(run_child, base_path=base_path),
    )


def _primed_children(
    run_child: forkserver.ChildMain, *, base_path: list[str]
) -> primed.PrimedChildren | None:
    limit_text = os.environ.get(PRIMED_ENV, "").strip()
    limit = defaults.WARM_PRIMED_CHILDREN
    if limit_text.isascii() and limit_text.isdigit():
        limit = int(limit_text)
    elif limit_text:
        print(
            f"warm playbook server: {PRIMED_ENV}={limit_text!r} is not a whole number >= 0; "
            f"keeping {limit} primed children",
            file=sys.stderr,
            flush=True,
        )
    if limit <= 0:
        return None
    try:
        definitions = configkey.load_definitions()
    except Exception as error:  # an ansible-core we cannot read: runs stay unprimed
        print(f"warm playbook server: not priming: {error!r}", file=sys.stderr, flush=True)
        return None
    return primed.PrimedChildren(
        child_main=run_child,
        definitions=definitions,
        base_path=base_path,
        main_dir=os.path.dirname(real_playbook()),
        limit=limit,
        prime_timeout=defaults.WARM_START_TIMEOUT,
    )


if __name__ == "__main__":
    main()
