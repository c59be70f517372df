"""The ansible-core 2.18 compatibility mode (docs/porting.md).

Roles written for the Go operator ran on ansible-core 2.18. This package makes them
run unchanged on the default line (2.19 and later), and keeps each 2.18 behaviour
they rely on visible to their author:

    mode         whether the mode is on (flag, environment, default) and the Ansible
                 settings it puts into every run's environment
    stringfields numbers in string-typed Kubernetes fields, sent as text (called by
                 the API proxy, proxy.screen)
    notices      the 2.18 behaviours a run relied on, found in its events and the
                 proxy's notes (logged, counted and listed by the controller and plan)
    ansible-plugins/
                 loaded by Ansible, not by the operator: the `template` lookup that
                 gives '' for a template rendering nothing

Layering: below runner | status | proxy, above warm; imports only config and errors.
"""
