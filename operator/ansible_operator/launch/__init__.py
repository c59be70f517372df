"""launch: one run of a custom resource, put together (see the ansible_operator package
docstring for where this layer sits).

The controller's reconciler and the planning engine (plan/engine.py) both build a
run here, so a plan runs exactly what a reconcile would. Modules, in the order a
run is put together:

    request        build_run_request and RunSettings: the one place a RunRequest is made
    crannotations  the CR's annotations that tune a reconcile (period, verbosity,
                   artifacts, drift checks)
    extravars      the run's extra vars, from the CR in one pass
    snakecase      the Go operator's snake_case spelling of CR keys
    jsontree       iterative copies and depth checks of JSON-like trees
    tasklog        `--ansible-log-events`: task results as the operator's log lines
    compatlog      the 2.18 behaviours a run relied on (compat.notices) as log warnings
                   and the deprecations metric, chained after the task logger
    access         the run's own token and kubeconfig for the API proxy
"""
