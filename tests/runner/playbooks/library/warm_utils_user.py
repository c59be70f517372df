"""Returns a value from the project's own module_utils (tests/runner/test_warm_runs.py)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.warm_util import VALUE


def main() -> None:
    module = AnsibleModule(argument_spec={})
    module.exit_json(changed=False, value=VALUE)


if __name__ == "__main__":
    main()
