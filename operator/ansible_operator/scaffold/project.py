"""`ansible-operator init`: write a new project with the Operator SDK's layout.

Called by :mod:`ansible_operator.scaffold.commands` (the CLI). :func:`init`
checks the domain and project name, stages every file of
templates/init/ plus the PROJECT file on a
:class:`~ansible_operator.scaffold.writer.Plan`, stages the first API too
when a group, version and kind were given (:func:`.api.stage_api`), and
writes everything at once. A project that exists already (a PROJECT file) is
refused, and no file that exists is ever overwritten.
"""

from __future__ import annotations

from pathlib import Path

from ansible_operator import __version__
from ansible_operator.config import defaults
from ansible_operator.errors import ConfigError
from ansible_operator.scaffold import edits, templates
from ansible_operator.scaffold.api import ApiRequest, stage_api
from ansible_operator.scaffold.names import check_dns1123_label, check_dns1123_subdomain
from ansible_operator.scaffold.writer import Plan


def project_name_for(root: Path, given: str | None) -> str:
    """--project-name, or the directory's name when it is not given (as the SDK does)."""
    if given is not None:
        return check_dns1123_label(given, flag="--project-name")
    name = root.resolve().name
    try:
        return check_dns1123_label(name, flag="--project-name")
    except ConfigError as err:
        raise ConfigError(
            f"--project-name: not given, and the directory name {name!r} is not a valid "
            "project name (a DNS-1123 label: lower-case letters, digits and '-'); "
            "pass --project-name"
        ) from err


def init(
    plan: Plan, *, domain: str, project_name: str | None, api: ApiRequest | None = None
) -> list[str]:
    """Stage and write the project; return what was written, one line per file."""
    check_dns1123_subdomain(domain, flag="--domain")
    name = project_name_for(plan.root, project_name)
    if plan.exists(edits.PROJECT_FILE):
        raise ConfigError(
            f"{edits.PROJECT_FILE}: already exists in {plan.root}: this directory holds a "
            "project already; add kinds with `ansible-operator create api`"
        )
    values = {
        "project_name": name,
        "domain": domain,
        "base_image": defaults.BASE_IMAGE,
        "operator_version": __version__,
    }
    for stored in templates.tree("init"):
        plan.create(templates.output_name(stored), templates.render(f"init/{stored}", values))
    plan.create(
        edits.PROJECT_FILE, edits.dump_project(edits.new_project(domain=domain, project_name=name))
    )
    if api is not None:
        stage_api(plan, api)
    return plan.commit()
