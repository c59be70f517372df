"""A stand-in for operator_sdk.util's requeue_after module: returns `period`."""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(argument_spec={"time": {"type": "str", "required": True}})
    period = module.params["time"]
    if not re.fullmatch(r"[hms0-9]*", period):
        module.fail_json(msg="invalid time input")
    module.exit_json(changed=False, period=period)


if __name__ == "__main__":
    main()
