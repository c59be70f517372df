"""Scaffolding: `ansible-operator init` and `ansible-operator create api`.

A sibling of the controller layer (both sit below cli): it writes files and
never talks to a cluster, so it imports only config and errors. Flow:

    flags      the sub-commands' flags; added by cli to every parse
    commands   running the sub-commands; imported by cli only when one runs
    project    init: the project's files (templates/init/) and PROJECT
    api        create api: one kind's files and the edits of existing ones
    edits      marker insertions in files a user may have edited; PROJECT
    names      checks of every name a user passes (Kubernetes' rules)
    templates  the package-data templates and their @@placeholders@@
    writer     stages everything in memory, then writes all or nothing
"""
