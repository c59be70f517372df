"""runner: one Ansible run, from a RunRequest to a RunResult (see the ansible_operator
package docstring for where this layer sits; docs/runner.md describes it in full).

Modules, in the order a run meets them:

    base            the seam: RunRequest, RunResult, RunOutcome, the Runner protocol
    ansible         AnsibleRunner: ansible-runner in the calling thread (the only user
                    of ansible_runner)
    privatedir      the resource's private data dir: env files, inventory, artifacts
    extravarsfile   env/extravars, written as the Go operator writes it
    scratch         the run's scratch directory (its TMPDIR), locked while it runs
    tempdirs        TMPDIR and Ansible's temp dirs inside the scratch directory
    jobevents       typed job events and the verdict: which failures count
    nolog           what Ansible prints about no_log results, kept out of the artifacts
    ptyreap         the end of a run without pexpect's fixed 0.1 s sleep
    sweep           finding and killing every process of a run
    lifeline        every run's processes die with the operator; its watchdog
    fakerunner      FakeRunner, the scripted Runner for tests of the layers above
"""
