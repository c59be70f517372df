"""ansible_operator: run Ansible roles and playbooks for Kubernetes custom resources.

A drop-in replacement for the Operator SDK's Go `ansible-operator` (v1.42):
the same `watches.yaml`, extra vars, status conditions, annotations, flags and
environment variables, so roles written for it run unchanged.

Layers, top to bottom (a module imports only from layers below it):

    cli            the `ansible-operator` command: run, validate, version, init, create api, plan
    controller | scaffold
                   controller: watching (kopf), queueing, reconciling, finalizers, leader
                   election, drift checks; scaffold: writing new projects (init,
                   create api), no cluster
    plan           a CR's run in check mode through a read-only proxy, read back as
                   changes: the `plan` command, and the engine drift checks use
    launch         one run of a CR put together: its request (extra vars from the CR,
                   the tuning annotations, the role or finalizer) and its access (a
                   token and kubeconfig for the API proxy); used by controller and plan
    runner | status | proxy
                   one Ansible run; status conditions; the API endpoint roles talk to
    compat         the ansible-core 2.18 compatibility mode: run settings, string fields, notices
    warm           fork servers that start ansible-playbook and Python modules warm
    kube           the Kubernetes API client and its helpers
    observability  logging, metrics, health probes, Kubernetes Events
    config         watches.yaml, flags, environment; every default lives in config.defaults
    errors | clocks
                   the exception hierarchy; the monotonic and wall clocks every timed
                   decision reads, and the FakeClock tests move by hand

Third-party frameworks stay behind the modules that wrap them: `kubernetes` is
imported only in kube (and only for exec-plugin and auth-provider logins),
`ansible_runner` only in runner.ansible, `kopf` only in controller.kopfimport.
`make lint` checks all three, and the layers, with import-linter (pyproject.toml).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
