#!/usr/bin/python
"""operator_sdk.util.requeue_after: ask the operator to reconcile the CR again after a delay.

Where this sits: called by roles an ansible-operator runs. The module only
validates and echoes its argument; the operator watches the run's events for a
task whose action is `requeue_after` (or `operator_sdk.util.requeue_after`),
reads `period` from its result and schedules the next reconcile (see
docs/collection.md and the runner's event handling).
"""

import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: requeue_after
short_description: Ask the operator to reconcile the resource again after a delay
version_added: "0.0.1"
author: ansible-operator (Python) maintainers
description:
  - Tells the ansible-operator running this role to reconcile the custom resource again once
    the given time has passed, instead of after its usual reconcile period.
  - The operator reads C(period) from the task's result; the first such task of a run wins.
    (The Go operator stopped watching the run at that task; this one waits for the run to end
    and applies the period together with the run's result.)
options:
  time:
    description:
      - Delay before the next reconcile, as a Go duration made of digits and C(h), C(m), C(s)
        units, e.g. C(30s), C(5m), C(1h30m).
      - Other characters fail the task with C(invalid time input). A value the operator cannot
        parse as a duration (for example C(5) without a unit) fails the reconcile instead.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check again in five minutes
  operator_sdk.util.requeue_after:
    time: 5m
"""

RETURN = r"""
period:
  description: The requested delay, exactly as given.
  returned: success
  type: str
  sample: 5m
"""

# Upstream's character check; the operator parses the value as a Go duration.
_TIME = re.compile(r"^[hms0-9]*$")


def main():
    module = AnsibleModule(
        argument_spec={"time": {"type": "str", "required": True}},
        supports_check_mode=True,
    )
    period = module.params["time"]
    if not _TIME.match(period):
        module.fail_json(msg="invalid time input")
    module.exit_json(changed=False, period=period)


if __name__ == "__main__":
    main()
