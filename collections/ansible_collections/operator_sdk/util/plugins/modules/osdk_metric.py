#!/usr/bin/python
"""operator_sdk.util.osdk_metric: create or update a custom Prometheus metric in the operator.

Where this sits: called by roles an ansible-operator runs. It POSTs one JSON
request to the operator's user metrics API (ansible_operator.observability.
usermetrics, on 127.0.0.1:5050 by default), which registers the metric on
first use and exposes it with the operator's own metrics. The server decides
what is valid; this module reports its answer.
"""

import json
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.module_utils.urls import open_url

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a custom Prometheus metric of the operator
version_added: "0.4.0"
author: ansible-operator (Python) maintainers
description:
  - Sends one operation on a counter, gauge, histogram or summary to the operator's user
    metrics API. The metric is created the first time its name is used and is then served
    with the operator's own metrics.
  - Give exactly one of I(counter), I(gauge), I(histogram) or I(summary). An empty I(counter)
    or I(gauge) only creates the metric; an empty I(histogram) or I(summary) observes 0, as
    with the Go operator. A metric keeps the type it was created with.
options:
  name:
    description: Metric name, e.g. C(my_app_restarts).
    type: str
    required: true
  description:
    description: Help text of the metric (only the first request's text is used).
    type: str
    required: true
  address:
    description: URL of the operator's user metrics API.
    type: str
    default: http://localhost:5050/metrics
  counter:
    description: Operate on a counter.
    type: dict
    suboptions:
      increment:
        description: Add one.
        type: bool
      add:
        description: Add this non-negative value (ignored when I(increment) is true).
        type: float
  gauge:
    description:
      - "Operate on a gauge. Only the first of I(increment), I(decrement), I(add), I(subtract),
        I(set), I(set_to_current_time) that is set (true or non-zero) is applied;
        C(set: 0) therefore does nothing."
    type: dict
    suboptions:
      set:
        description: Set the gauge to this value.
        type: float
      increment:
        description: Add one.
        type: bool
      decrement:
        description: Subtract one.
        type: bool
      add:
        description: Add this value.
        type: float
      subtract:
        description: Subtract this value.
        type: float
      set_to_current_time:
        description: Set the gauge to the current Unix time in seconds.
        type: bool
  histogram:
    description: Observe a value in a histogram (default Prometheus buckets).
    type: dict
    suboptions:
      observe:
        description: The value to observe (0 when omitted).
        type: float
  summary:
    description: Observe a value in a summary.
    type: dict
    suboptions:
      observe:
        description: The value to observe (0 when omitted).
        type: float
"""

EXAMPLES = r"""
- name: Count successful backups
  operator_sdk.util.osdk_metric:
    name: backups_completed
    description: Backups completed by the operator
    counter:
      increment: true

- name: Record how many replicas are ready
  operator_sdk.util.osdk_metric:
    name: ready_replicas
    description: Ready replicas of the managed application
    gauge:
      set: "{{ ready | int }}"
"""

RETURN = r"""
msg:
  description: The metrics API's error text.
  returned: failure
  type: str
status_code:
  description: HTTP status of the metrics API's answer when it was not 200.
  returned: failure
  type: int
address:
  description: The metrics API the request would have gone to.
  returned: check mode
  type: str
request:
  description: The JSON body that would have been sent; nothing is sent in check mode.
  returned: check mode
  type: dict
"""

_KINDS = ("counter", "gauge", "histogram", "summary")
# The API answers at once; this only bounds a wedged or wrong address.
_TIMEOUT_SECONDS = 30


def _options(**fields):
    return {"type": "dict", "options": {key: {"type": kind} for key, kind in fields.items()}}


ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "description": {"type": "str", "required": True},
    "address": {"type": "str", "default": "http://localhost:5050/metrics"},
    "counter": _options(increment="bool", add="float"),
    "gauge": _options(
        set="float",
        increment="bool",
        decrement="bool",
        add="float",
        subtract="float",
        set_to_current_time="bool",
    ),
    "histogram": _options(observe="float"),
    "summary": _options(observe="float"),
}


def payload(params):
    """The request body: name, description and each metric section that was given."""
    body = {"name": params["name"], "description": params["description"]}
    for kind in _KINDS:
        section = params.get(kind)
        if section is not None:
            # Unset fields mean "not requested"; the API reads absent and null alike.
            body[kind] = {key: value for key, value in section.items() if value is not None}
    return body


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    url = module.params["address"]
    if module.check_mode:
        # Nothing is sent: the result says what would be (ansible-operator plan).
        module.exit_json(changed=True, address=url, request=payload(module.params))
    try:
        response = open_url(
            url,
            data=json.dumps(payload(module.params)),
            headers={"Content-Type": "application/json"},
            method="POST",
            timeout=_TIMEOUT_SECONDS,
        )
    except HTTPError as exc:
        module.fail_json(
            msg=to_text(exc.read(), errors="surrogate_or_replace"), status_code=exc.code
        )
    except (URLError, OSError) as exc:
        module.fail_json(msg=f"Could not reach the metrics API at {url}: {to_native(exc)}")
    status = response.getcode()
    if status != 200:
        body = to_text(response.read(), errors="surrogate_or_replace")
        module.fail_json(msg=body, status_code=status)
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
