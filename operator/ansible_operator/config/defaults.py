"""Every default of the operator, in one place.

Read by :mod:`ansible_operator.config.watches` when it fills in keys a
watches.yaml entry leaves out, and by the `ansible-operator run` / `validate`
argument parsers (cli) for the defaults of their flags. Nothing else in the
package may hard-code one of these values: change a default here and
everything follows.

The values are those of the Go `ansible-operator` v1.42 unless a comment says
we differ on purpose (docs/watches.md lists each difference and why).
Durations are float seconds, as everywhere else in the package.
"""

from __future__ import annotations

import os


def _visible_cpus() -> int:
    # Go's runtime.NumCPU counts the CPUs this process may run on (its
    # affinity mask), not the CPUs of the machine; sched_getaffinity gives the
    # same number where it exists. os.cpu_count() is the fallback elsewhere.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# --- watches.yaml keys -------------------------------------------------------

# `ansible-runner --rotate-artifacts N`; a literal 0 in the file also means this.
MAX_RUNNER_ARTIFACTS = 20
# The operator writes the Running/Successful/Failure conditions itself.
MANAGE_STATUS = True
# Objects the role creates through the proxy are watched and trigger reconciles.
WATCH_DEPENDENT_RESOURCES = True
# Cluster-scoped dependents are not watched unless asked for.
WATCH_CLUSTER_SCOPED_RESOURCES = False
# CR spec keys are converted to snake_case before they become extra vars.
SNAKE_CASE_PARAMETERS = True
# Annotation-only changes of the CR do not trigger a reconcile.
WATCH_ANNOTATIONS_CHANGES = False
# DIFFERENT FROM THE GO OPERATOR (its default is false): CR values reach
# Ansible marked unsafe, so text such as "{{ lookup('pipe', 'id') }}" written by
# whoever can edit a CR is never templated. An entry opts out with
# `markUnsafe: false`.
MARK_UNSAFE = True
# A watch's reconcilePeriod of 0 (or none) means "use --reconcile-period".
WATCH_RECONCILE_PERIOD = 0.0
# driftCheckPeriod (ours; docs/plan.md): 0 or none means no drift checks...
WATCH_DRIFT_CHECK_PERIOD = 0.0
# ...unless observeOnly is set (ours): then a CR is checked this often (5m).
OBSERVE_ONLY_DRIFT_CHECK_PERIOD = 300.0
# Drift checks never run while a reconcile of the same CR waits or runs, nor
# beyond the concurrency limits; one that cannot start now tries again this
# many seconds later.
DRIFT_CHECK_RETRY = 1.0
# Threads that run drift checks (each check also needs a free reconcile slot).
DRIFT_CHECK_WORKERS = 2
# At shutdown running drift checks are cancelled (their Ansible killed); seconds
# given to them to end before the reconciles' graceful shutdown starts.
DRIFT_CHECK_STOP_GRACE = 5.0
# The Drifted condition's message names at most this many objects ("and N more").
DRIFT_MESSAGE_OBJECTS = 3
# Bounds of ANSIBLE_VERBOSITY_<KIND>_<GROUP>; outside them the flag value is used.
ANSIBLE_VERBOSITY_MIN = 0
ANSIBLE_VERBOSITY_MAX = 7

# Where `role: ns.coll.role` is looked for when ANSIBLE_COLLECTIONS_PATH is
# unset or empty: the system directory, then this directory under $HOME.
SYSTEM_COLLECTIONS_PATH = "/usr/share/ansible/collections"
HOME_COLLECTIONS_SUBDIR = ".ansible/collections"

# --- `ansible-operator run` flags --------------------------------------------

# --watches-file, relative to the working directory (/opt/ansible in the image).
WATCHES_FILE = "./watches.yaml"
# --reconcile-period: 10h between successful reconciles of an unchanged CR.
RECONCILE_PERIOD = 10 * 3600.0
# --max-concurrent-reconciles: per watched kind, like Go's runtime.NumCPU().
MAX_CONCURRENT_RECONCILES = _visible_cpus()
# --max-concurrent-reconciles-total (ours; the Go operator has no global cap):
# bounds the Ansible runs alive at once across all kinds, so N kinds cannot
# fork N x CPUs ansible-runner process trees.
MAX_CONCURRENT_RECONCILES_TOTAL = 2 * MAX_CONCURRENT_RECONCILES
# --ansible-verbosity: 2 is `-vv`.
ANSIBLE_VERBOSITY = 2
# --ansible-log-events: which Ansible events are logged (tasks/everything/nothing).
ANSIBLE_LOG_EVENTS = "tasks"
# --ansible-args: extra ansible-playbook arguments, none by default.
ANSIBLE_ARGS = ""
# --ansible-roles-path / --ansible-collections-path: empty leaves the
# environment variables ANSIBLE_ROLES_PATH / ANSIBLE_COLLECTIONS_PATH as they are.
ANSIBLE_ROLES_PATH = ""
ANSIBLE_COLLECTIONS_PATH = ""
# --inject-owner-ref: objects created through the proxy get an ownerReference.
INJECT_OWNER_REF = True
# --metrics-bind-address; "0" disables the metrics server.
METRICS_BIND_ADDRESS = ":8443"
# --metrics-secure / --metrics-require-rbac / --enable-http2: all off.
METRICS_SECURE = False
METRICS_REQUIRE_RBAC = False
ENABLE_HTTP2 = False
# --health-probe-bind-address: /healthz and /readyz.
HEALTH_PROBE_BIND_ADDRESS = ":6789"
# --user-metrics-bind-address (ours; fixed at localhost:5050 in the Go
# operator): where osdk_metric posts custom metrics. "0" disables it.
USER_METRICS_BIND_ADDRESS = "127.0.0.1:5050"
# --proxy-port: the local API proxy the roles' kubeconfig points at.
PROXY_PORT = 8888
# --leader-elect and its identity; off unless the Deployment asks for it.
LEADER_ELECT = False
LEADER_ELECTION_ID = ""
LEADER_ELECTION_NAMESPACE = ""
# Lease timings, as controller-runtime's defaults.
LEADER_ELECT_LEASE_DURATION = 15.0
LEADER_ELECT_RENEW_DEADLINE = 10.0
LEADER_ELECT_RETRY_PERIOD = 2.0
# --sharding / ANSIBLE_OPERATOR_SHARDING (ours): replicas share the CRs, each
# holding a member Lease with the timings above (docs/sharding.md). Off: one
# replica, or leader election, exactly as the Go operator.
SHARDING = False
SHARDING_ENV = "ANSIBLE_OPERATOR_SHARDING"
# Bounded loads: no member owns more than this factor times the mean number
# of CRs (rounded up). 1.1 keeps 3 members within 10% of even while a joining
# member moves about a third of the CRs instead of a quarter.
SHARDING_LOAD_FACTOR = 1.1
# --graceful-shutdown-timeout: how long running work may take to stop.
GRACEFUL_SHUTDOWN_TIMEOUT = 30.0
# --ansible-run-timeout (ours): seconds one Ansible run may take; 0 means no
# limit, which is what the Go operator has.
ANSIBLE_RUN_TIMEOUT = 0.0
# Root of the per-CR ansible-runner input directories.
RUNNER_DIR_ROOT = "/tmp/ansible-operator/runner"  # noqa: S108 - the Go operator's path, kept
# Backoff after a failed reconcile: base * 2^(failures - 1), capped. The Go
# operator starts at 5 ms, which re-runs a failing playbook several times
# within a second; an Ansible run costs seconds, so we start at 1 s and keep
# its cap of 1000 s.
RETRY_BACKOFF_BASE = 1.0
RETRY_BACKOFF_MAX = 1000.0
# --warm-ansible (ours): fork ansible-playbook and Python modules from warm
# interpreters (the warm package); false gives the cold path of exec'ing both.
WARM_ANSIBLE = True
# DIFFERENT FROM THE GO OPERATOR (which runs every CR again after a restart):
# --reconcile-all-at-start. False: a CR whose last reconcile succeeded with the same
# generation, content and settings waits for its reconcile period (controller/restartrule.py).
RECONCILE_ALL_AT_START = False
# DIFFERENT FROM THE GO OPERATOR (which writes Running before every run):
# --running-condition-delay. The Running condition and Event come only if a run is
# still going after this long (controller/runningmark.py); 0: before every run.
RUNNING_CONDITION_DELAY = 1.0
# Periodic reconciles come up to this fraction of the period early, so that a fleet
# created at once does not come back all in the same minute.
RECONCILE_PERIOD_JITTER = 0.1
# How long the operator waits for a warm server to listen at start-up, and for
# one to exit at shutdown; a server that misses it is left out (runs go cold).
WARM_START_TIMEOUT = 30.0
WARM_STOP_TIMEOUT = 5.0
# --warm-idle-timeout: the warm servers start with the first run and stop after
# this long without runs, so an idle operator is the operator process alone (5m).
# 0: once started, they stay up until the operator stops.
WARM_IDLE_TIMEOUT = 300.0
# A warm server that died is restarted by the next run, but at most this often
# (seconds since it was last started), so one that cannot start costs little.
WARM_RESTART_INTERVAL = 5.0
# Built AnsiballZ payloads that warm runs share (warm/payloadcache.py), kept in the warm
# directory: at most this many, the least recently used go first (a
# kubernetes.core.k8s payload is about 280 KB). 0 turns the sharing off.
WARM_ANSIBALLZ_CACHE_ENTRIES = 64
# Primed children of the playbook helper (warm/primed.py): processes that imported
# Ansible's controller once for one configuration and fork its runs, at most this
# many (about 6 MiB each); the least recently used goes first. 0: every run child
# imports the controller itself.
WARM_PRIMED_CHILDREN = 4
# The ansible-core lines (major.minor) warm Ansible was checked on: its pre-import lists
# (warm/preimports.py) and the module server's payload loading follow ansible-core's
# internals. On any other line the operator logs why and every run starts cold.
WARM_ANSIBLE_CORE_LINES = ("2.18", "2.19", "2.21")
# --ansible-compat / ANSIBLE_OPERATOR_ANSIBLE_COMPAT (ours; docs/porting.md): the
# ansible-core 2.18 compatibility mode. On by default, so a project built for the Go
# operator (its image runs ansible-core 2.18) that changes only its FROM line runs its
# roles unchanged on the default line; "off" once the roles are ported (the mode then
# reports nothing left to port).
ANSIBLE_COMPAT_ON = "2.18"
ANSIBLE_COMPAT_OFF = "off"
ANSIBLE_COMPAT = ANSIBLE_COMPAT_ON
ANSIBLE_COMPAT_ENV = "ANSIBLE_OPERATOR_ANSIBLE_COMPAT"
# ansible-core's own default of DEFAULT_LOOKUP_PLUGIN_PATH (config/base.yml): the mode
# puts its lookup directory in front of it when ANSIBLE_LOOKUP_PLUGINS is unset.
ANSIBLE_LOOKUP_PLUGINS_PATH = "~/.ansible/plugins/lookup:/usr/share/ansible/plugins/lookup"
# glibc malloc arenas per process for the operator and everything forked from the warm
# servers (warm/malloc.py): fewer arenas keep less freed memory around; 0 leaves
# glibc's default (8 per CPU). MALLOC_ARENA_MAX in the environment wins.
MALLOC_ARENAS = 2

# --- images -----------------------------------------------------------------

# The base image (operator/Dockerfile): our counterpart of the Go operator's
# quay.io/operator-framework/ansible-operator, with the same contract (HOME,
# uid 1001, entrypoint). Projects build FROM it; `ansible-operator init` writes
# this name into the project's Dockerfile. Tag = the package version.
BASE_IMAGE_NAME = "ansible-operator-base"
BASE_IMAGE_TAG = "v0.1.0"
BASE_IMAGE = f"{BASE_IMAGE_NAME}:{BASE_IMAGE_TAG}"

# --- scaffolding (`ansible-operator init`, `create api`) ----------------------

# The PROJECT file's layout: the Operator SDK's Ansible plugin, so that tools
# and people who know SDK projects recognise ours.
SCAFFOLD_LAYOUT = "ansible.sdk.operatorframework.io/v1"
# --crd-version: the only one Kubernetes still serves (v1beta1 went in 1.22).
SCAFFOLD_CRD_VERSION = "v1"
