"""Warm Ansible: `ansible-playbook` and Python modules forked from warm interpreters.

Where this sits: below the runner layer, above config. Starting `ansible-playbook`
costs about 0.5 s of imports, and every Python module task starts a fresh interpreter
that imports `ansible.module_utils.basic` and the Kubernetes client (0.6-0.8 s a
task). This package keeps two long-lived, single-threaded interpreters that have done
those imports once and forks a fresh run child from them instead.

Life of the part:

* The operator (controller/manager.py) creates a `supervisor.WarmServers` after it
  won leadership and before the first run. It starts two processes with
  `python -m ansible_operator.warm.pbserver` (the playbook helper) and
  `python -m ansible_operator.warm.modserver` (the module server); each listens on a
  Unix socket in a 0700 directory under the runner root (`<root>/.warm-<pid>/`, sockets
  0600). The operator itself is never forked: it has threads and an event loop.
* For each run, runner/ansible.py asks the supervisor for the run environment: the
  private `bin/` dir (an `ansible-playbook` shim) first on PATH, the two socket paths,
  and the interpreter client (`bin/python`) that the generated inventory names as
  `ansible_python_interpreter`. A server that died is restarted then; until it is up
  again the clients exec the real program (the cold path), so no run fails for it.
* ansible-runner spawns the shim as usual. The shim (client.py, stdlib only) connects,
  sends fds 0-2 (SCM_RIGHTS), argv, environment and cwd, forwards signals and exits
  with the run child's status. The interpreter client does the same for AnsiballZ
  module runs (script mode or pipelined stdin) and execs the real python otherwise.
* Before its first fork each server, and each primed child, *seals* what it imported
  (immortal.py): everything its modules reach gets CPython's immortal reference
  count, so the processes forked from it use those objects without copying their
  pages.
* Per connection the server forks a *keeper* (forkserver.py: `setsid`, child
  subreaper); the playbook helper first hands the request to the *primed child* of
  its configuration (primed.py, configkey.py: a fork that has imported Ansible's
  controller for exactly that configuration), which forks the keeper instead. The
  keeper forks the *run child* (child.py): it tags its process name with
  the run marker (so runner/sweep.py finds forked processes, whose /proc environ is
  the server's), takes over the stdio fds, environment, cwd and TMPDIR, and runs the
  real `ansible-playbook` script or the module payload as `__main__`, then exits like
  a fresh interpreter. The keeper reports the exit status; if the client vanishes
  (ansible-runner SIGKILLed it on cancel/timeout) it kills the whole subtree.
* A playbook run child also installs payloadcache.py: the AnsiballZ payloads its workers
  build are shared with later runs through `<root>/.warm-<pid>/ansiballz/`, and used
  only while every file they were built from is unchanged (payloadtrace.py records what a
  build read; payloadentries.py writes, checks and evicts the entries).
* At shutdown the manager calls `WarmServers.stop()`: the servers are terminated and
  the directory removed. A server whose parent (the operator) is gone exits by itself.

Modules:

    supervisor   starts, restarts and stops the two servers; a run's environment
    handoff      the thin clients: the ansible-playbook shim, the interpreter client
    protocol     the wire format between clients and servers; shared names
    pbserver     the playbook helper;  modserver  the module server
    forkserver   the fork-server core both servers share: keepers, run children
    primed       primed children: the controller imported once per configuration
    configkey    which runs may share a primed child; per-run settings
    child        a forked run child made into a fresh interpreter
    bootstrap    the servers' start-up steps; preimports  what they import, and why
    immortal     sealing imported objects before forking (PEP 683)
    malloc       glibc arenas of the operator and the servers
    payloadcache      built AnsiballZ payloads shared across runs;  payloadentries  their
                 entries;  payloadtrace  what a build read
    routingprime  ansible.builtin's routing file, parsed once

Processes: operator -> pbserver [-> primed child] / modserver -> keeper (one per
request) -> run child
-> ansible workers / module children; the clients are children of ansible-runner or
of Ansible's `/bin/sh`.
"""
