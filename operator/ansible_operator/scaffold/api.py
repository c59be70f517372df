"""`ansible-operator create api`: add one kind to a project, everywhere it belongs.

Called by :mod:`ansible_operator.scaffold.commands` (the CLI) and by
:func:`ansible_operator.scaffold.project.init` when `init` is given a
group, version and kind. :func:`stage_api` checks the names and the
project (PROJECT file, watches.yaml), then stages on a
:class:`~ansible_operator.scaffold.writer.Plan`: new files (CRD, sample,
admin/editor/viewer roles, molecule test, role and/or playbook) and
insertions at the markers of files the user may have edited (watches.yaml,
the kustomizations, config/rbac/role.yaml). Nothing is written until the
caller commits the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ansible_operator.config import defaults
from ansible_operator.errors import ConfigError
from ansible_operator.scaffold import edits, templates
from ansible_operator.scaffold.names import ApiNames
from ansible_operator.scaffold.writer import Plan

WATCHES_FILE = "watches.yaml"
WATCH_MARKER = "# +kubebuilder:scaffold:watch"
# file -> the marker new entries go above
_LISTS = {
    "config/crd/kustomization.yaml": "#+kubebuilder:scaffold:crdkustomizeresource",
    "config/rbac/kustomization.yaml": "#+kubebuilder:scaffold:rbackustomizeresource",
    "config/samples/kustomization.yaml": "#+kubebuilder:scaffold:manifestskustomizesamples",
}
RBAC_ROLE = "config/rbac/role.yaml"
RBAC_MARKER = "#+kubebuilder:scaffold:rules"


@dataclass(frozen=True)
class ApiRequest:
    """The flags of `create api`, as given."""

    group: str
    version: str
    kind: str
    generate_role: bool = False
    generate_playbook: bool = False
    crd_version: str = defaults.SCAFFOLD_CRD_VERSION


def create_api(plan: Plan, request: ApiRequest) -> list[str]:
    """Stage and write the API; return what was written, one line per file."""
    stage_api(plan, request)
    return plan.commit()


def stage_api(plan: Plan, request: ApiRequest) -> ApiNames:
    if request.crd_version != defaults.SCAFFOLD_CRD_VERSION:
        raise ConfigError(
            f"--crd-version: {request.crd_version!r} is not supported: only "
            f"{defaults.SCAFFOLD_CRD_VERSION!r} (Kubernetes 1.22 and later serve no other)"
        )
    if not plan.exists(edits.PROJECT_FILE):
        raise ConfigError(
            f"{edits.PROJECT_FILE}: not found in {plan.root}: run `ansible-operator init` first, "
            "or run create api in the project's directory"
        )
    project = edits.load_project(plan.read(edits.PROJECT_FILE))
    names = ApiNames.checked(
        group=request.group, version=request.version, kind=request.kind, domain=project["domain"]
    )
    _check_new_kind(project, names)
    watches = _watches_entries(plan)
    _check_not_watched(watches, names)
    values = {**names.template_values(), "project_name": project["projectName"]}
    _stage_watch(plan, names, request)
    _stage_manifests(plan, names, values)
    _stage_ansible(plan, names, request, values)
    project.setdefault("resources", []).append(
        {
            "api": {"crdVersion": request.crd_version, "namespaced": True},
            "domain": project["domain"],
            "group": names.group,
            "kind": names.kind,
            "version": names.version,
        }
    )
    plan.update(edits.PROJECT_FILE, edits.dump_project(project))
    return names


def _check_new_kind(project: dict[str, Any], names: ApiNames) -> None:
    for resource in project.get("resources", []):
        group, kind, version = (resource.get(k) for k in ("group", "kind", "version"))
        if (group, kind) == (names.group, names.kind):
            if version == names.version:
                raise ConfigError(
                    f"--kind: the API resource already exists: {names.api_version}, "
                    f"Kind={names.kind} (PROJECT)"
                )
            raise ConfigError(
                f"--version: {names.kind} already exists in {names.full_group} with version "
                f"{version}; create api cannot add a version to an existing kind"
            )
        if group != names.group and not project.get("multigroup"):
            raise ConfigError(
                f"--group: {names.group!r}: multiple groups are not allowed by default "
                f"(this project's group is {group!r}); to enable multi-group set "
                "'multigroup: true' in your PROJECT file"
            )


def _watches_entries(plan: Plan) -> list[Any]:
    try:
        entries = yaml.safe_load(plan.read(WATCHES_FILE))
    except yaml.YAMLError as err:
        raise ConfigError(f"{WATCHES_FILE}: not valid YAML: {str(err).splitlines()[0]}") from err
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{WATCHES_FILE}: expected a list of watches")
    return entries


def _check_not_watched(entries: list[Any], names: ApiNames) -> None:
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if (entry.get("group"), entry.get("version"), entry.get("kind")) == (
            names.full_group,
            names.version,
            names.kind,
        ):
            raise ConfigError(
                f"--kind: {WATCHES_FILE} already has a watch for {names.api_version}, "
                f"Kind={names.kind}"
            )


def _stage_watch(plan: Plan, names: ApiNames, request: ApiRequest) -> None:
    lines = [f"- version: {names.version}", f"  group: {names.full_group}", f"  kind: {names.kind}"]
    if request.generate_playbook:
        lines.append(f"  playbook: playbooks/{names.lower}.yml")
    elif request.generate_role:
        lines.append(f"  role: {names.lower}")
    else:
        lines.append("  # FIXME: Specify the role or playbook for this resource.")
    text = edits.insert_before_marker(
        plan.read(WATCHES_FILE), marker=WATCH_MARKER, fragment="\n".join(lines), path=WATCHES_FILE
    )
    plan.update(WATCHES_FILE, text)


def _append_to_list(plan: Plan, path: str, item: str) -> None:
    text = edits.insert_before_marker(
        plan.read(path), marker=_LISTS[path], fragment=f"- {item}", path=path
    )
    plan.update(path, text)


def _stage_manifests(plan: Plan, names: ApiNames, values: dict[str, str]) -> None:
    crd = f"bases/{names.full_group}_{names.plural}.yaml"
    plan.create(f"config/crd/{crd}", templates.render("api/crd.yaml", values))
    _append_to_list(plan, "config/crd/kustomization.yaml", crd)
    plan.create(f"config/samples/{names.sample_file}", templates.render("api/sample.yaml", values))
    _append_to_list(plan, "config/samples/kustomization.yaml", names.sample_file)
    for role in ("admin", "editor", "viewer"):
        name = f"{names.lower}_{role}_role.yaml"
        plan.create(f"config/rbac/{name}", templates.render(f"api/{role}_role.yaml", values))
        _append_to_list(plan, "config/rbac/kustomization.yaml", name)
    rules = templates.render("api/role_rules.yaml", values)
    plan.update(
        RBAC_ROLE,
        edits.insert_before_marker(
            plan.read(RBAC_ROLE), marker=RBAC_MARKER, fragment=rules, path=RBAC_ROLE
        ),
    )
    plan.create(
        f"molecule/default/tasks/{names.lower}_test.yml",
        templates.render("api/molecule_test.yml", values),
    )


def _stage_ansible(
    plan: Plan, names: ApiNames, request: ApiRequest, values: dict[str, str]
) -> None:
    if request.generate_role:
        for stored in templates.tree("api/role"):
            plan.create(
                f"roles/{names.lower}/{templates.output_name(stored)}",
                templates.render(f"api/role/{stored}", values),
            )
    if request.generate_playbook:
        source = "api/playbook_role.yml" if request.generate_role else "api/playbook.yml"
        plan.create(f"playbooks/{names.lower}.yml", templates.render(source, values))
