"""plan: what a role or playbook would change, found without changing anything.

`ansible-operator plan` (cli) runs the watch's role or playbook for one custom
resource exactly as a reconcile would (launch.request.build_run_request: same
extra vars, role, finalizer), but in Ansible's check and diff mode and
through the API proxy with a read-only token (proxy.readonly): every write
reaches the API server as a server-side dry run, so even a module without
check mode cannot change the cluster.

    planflags the `plan` sub-command's flags; added by cli to every parse
    command   the `plan` sub-command: input, output, exit code; imported by cli when it runs
    engine    one plan: the run in check mode through a read-only proxy; also the
              drift checks' planner (controller.driftchecks imports it)
    target    which CR and watch: a CR file (dry-run against the API server) or KIND NAME
    journal   what the run did, in order: the proxy's dry-run writes and Ansible's task events
    changes   the journal read back as object changes with diffs (pure functions)
    report    the plan as text or as a stable JSON document; the exit code

docs/plan.md describes the command, its output and its limits.
"""
