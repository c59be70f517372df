"""The generated tree is the Operator SDK's, except where sdk_scaffold_listing.yaml says why not.

The listing (written by us from the specification, section 6) names every
file the SDK writes for `init` and two `create api` calls (a role and a
playbook); its `differences` name the files we leave out or add, each with a
reason, and docs/scaffolding.md must mention each of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.scaffold.edits import insert_before_marker
from tests.scaffold.conftest import BACKUP, MEMCACHED, Cli, files

HERE = Path(__file__).parent
DOCS = HERE.parents[1] / "docs" / "scaffolding.md"
KINDS = [
    ({"kind": "memcached", "plural": "memcacheds"}, "generate_role"),
    ({"kind": "backup", "plural": "backups"}, "generate_playbook"),
]


def listing() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((HERE / "sdk_scaffold_listing.yaml").read_text())
    return data


def sdk_tree() -> set[str]:
    sdk = listing()["sdk"]
    tree = set(sdk["init"])
    for names, flag in KINDS:
        values = {
            **names,
            "group": "cache",
            "full_group": "cache.example.com",
            "version": "v1alpha1",
        }
        for pattern in [*sdk["api"]["every"], *sdk["api"][flag]]:
            path = pattern
            for key, value in values.items():
                path = path.replace(f"<{key}>", value)
            tree.add(path)
    return tree


def test_the_tree_is_the_sdks_with_the_documented_differences(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    assert run_cli(project, *BACKUP, "--generate-playbook").code == 0
    differences = listing()["differences"]
    expected = (sdk_tree() - set(differences["not_written"])) | set(differences["added"])
    generated = files(project)
    assert sorted(generated - expected) == [], (
        "written but neither in the SDK's tree nor documented"
    )
    assert sorted(expected - generated) == [], (
        "in the SDK's tree but neither written nor documented"
    )


def test_every_difference_is_real_explained_and_in_the_docs() -> None:
    differences = listing()["differences"]
    tree = sdk_tree()
    docs = DOCS.read_text()
    for path, reason in differences["not_written"].items():
        assert path in tree, f"{path}: not in the SDK's listing"
        assert isinstance(reason, str), path
        assert reason.strip(), path
        assert f"`{path}`" in docs, f"docs/scaffolding.md does not mention {path}"
    for path, reason in differences["added"].items():
        assert path not in tree, f"{path}: the SDK writes it too"
        assert isinstance(reason, str), path
        assert reason.strip(), path
        assert f"`{path}`" in docs, f"docs/scaffolding.md does not mention {path}"


@pytest.mark.parametrize("fragment", ["- a.yaml", "- a.yaml\n- b.yaml"])
def test_a_fragment_present_already_is_not_inserted_twice(fragment: str) -> None:
    text = "resources:\n  #marker\n"
    once = insert_before_marker(text, marker="#marker", fragment=fragment, path="k.yaml")
    assert (
        once
        == "resources:\n" + "".join(f"  {line}\n" for line in fragment.splitlines()) + "  #marker\n"
    )
    assert insert_before_marker(once, marker="#marker", fragment=fragment, path="k.yaml") == once
