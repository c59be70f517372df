"""controller: watching custom resources and reconciling them (see the ansible_operator
package docstring for where this layer sits; docs/architecture.md traces one reconcile).

Modules, in the order one reconcile meets them:

    manager        `ansible-operator run`: start-up, leadership, shutdown
    wiring         builds the reconcile machinery after leadership and stops it in order
    kopfrun        runs kopf: the primary watches' registry, login, signals
    kopfimport     kopf, imported without the kubernetes package (the only importer of kopf)
    watching       kopf events -> queue keys: the primary watch's predicates
    watchbodies    the body of each queued CR, so the reconcile it caused needs no GET
    restartrule    at start-up, which CRs run at once and which wait for their period
    deepobjects    lets kopf read objects of any nesting depth
    dependents     objects a run wrote -> their owner's key, when they change or go
    queue          the work queue: one key per CR, priorities, limits, backoff
    queueobserver  the queue's metrics seam
    contract       Key, Outcome, decide(): the reconcile contract (queue action, metric)
    workers        the worker threads: key -> reconciler -> decide -> queue
    reconciler     one reconcile: read the CR, finalizer, run its role, report
    finalizers     add and remove the watch's finalizer
    runningmark    the Running condition and Event, for runs that last
    reporting      status conditions and Events of a reconcile
    statuswrite    status writes through the subresource, retrying conflicts
    metricshooks   what reconciles and runs report to the Prometheus metrics
    driftchecks    periodic plans of CRs, the Drifted condition (ours)
    driftsettings  whether and how often a CR gets drift checks
    rundirsweep    at start-up: runner directories of CRs that are gone
    leader         Lease-based leader election
    sharding/      sharded mode: replicas share the CRs (its own map)
"""
