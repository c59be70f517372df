"""warm/routingprime.py: routing files parsed once in the helper, exactly as a run would.

Uses ansible-core's real collection loader module and real routing files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ansible.utils.collection_loader import _collection_finder
from ansible.utils.collection_loader._collection_meta import _meta_yml_to_dict as parse

from ansible_operator.warm import routingprime

ROUTING = b"plugin_routing:\n  modules:\n    old:\n      redirect: ns.coll.new\n"


@pytest.fixture
def loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader's own function again after the test, whatever prime() set."""
    monkeypatch.setattr(_collection_finder, "_meta_yml_to_dict", parse)


def test_the_builtin_routing_file_is_primed(loader: None) -> None:
    files = routingprime.builtin_routing_files()
    assert files[0].name == "ansible_builtin_runtime.yml"
    assert routingprime.prime() == len(files)
    data = files[0].read_bytes()
    assert _collection_finder._meta_yml_to_dict(data, ("ansible.builtin", "runtime.yml")) == parse(
        data, None
    )


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (ROUTING, parse(ROUTING, None)),  # the primed bytes
        (ROUTING.decode(), parse(ROUTING, None)),  # the same content as str
        (ROUTING.replace(b"new", b"newer"), parse(ROUTING.replace(b"new", b"newer"), None)),
        (b"", {}),  # empty: the loader's own answer, never a primed document
    ],
    ids=["same-bytes", "same-text", "changed-bytes", "empty"],
)
def test_answers_are_what_parsing_the_given_bytes_gives(
    loader: None, tmp_path: Path, asked: bytes | str, expected: object
) -> None:
    primed = tmp_path / "runtime.yml"
    primed.write_bytes(ROUTING)
    assert routingprime.prime([primed]) == 1
    assert _collection_finder._meta_yml_to_dict(asked, ("ns.coll", "runtime.yml")) == expected


def test_a_primed_document_is_handed_out_once(loader: None, tmp_path: Path) -> None:
    primed = tmp_path / "runtime.yml"
    primed.write_bytes(ROUTING)
    routingprime.prime([primed])
    first = _collection_finder._meta_yml_to_dict(ROUTING, ("a.one", "runtime.yml"))
    first["plugin_routing"]["modules"]["old"]["redirect"] = "changed by collection a.one"
    second = _collection_finder._meta_yml_to_dict(ROUTING, ("b.two", "runtime.yml"))
    assert second == parse(ROUTING, None)  # not the dict a.one's loader went on to change


def test_priming_twice_does_not_stack_wrappers(loader: None, tmp_path: Path) -> None:
    primed = tmp_path / "runtime.yml"
    primed.write_bytes(ROUTING)
    routingprime.prime([primed])
    routingprime.prime([primed])
    assert _collection_finder._meta_yml_to_dict.__wrapped__ is parse


def test_an_unreadable_file_is_skipped(loader: None, tmp_path: Path) -> None:
    (tmp_path / "broken.yml").write_bytes(b"plugin_routing: [unclosed\n")
    assert routingprime.prime([tmp_path / "missing.yml", tmp_path / "broken.yml"]) == 0


def test_priming_reads_no_configuration() -> None:
    # In a fresh interpreter, as in the helper: ansible.constants must stay unimported.
    code = (
        "import sys; from ansible_operator.warm import routingprime; "
        "n = routingprime.prime(); assert n >= 1, n; "
        "assert 'ansible.constants' not in sys.modules; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_a_primed_file_is_not_parsed_again_in_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    parsed: list[object] = []

    def counting_parse(data: bytes | str, content_id: object) -> object:
        parsed.append(content_id)
        return parse(data, content_id)

    monkeypatch.setattr(_collection_finder, "_meta_yml_to_dict", counting_parse)
    primed = tmp_path / "runtime.yml"
    primed.write_bytes(ROUTING)
    routingprime.prime([primed])
    assert len(parsed) == 1  # in the helper, before any fork
    assert _collection_finder._meta_yml_to_dict(ROUTING, ("ns.coll", "runtime.yml"))
    assert len(parsed) == 1  # the run used the primed document
    _collection_finder._meta_yml_to_dict(b"other: 1\n", ("ns.other", "runtime.yml"))
    assert parsed[-1] == ("ns.other", "runtime.yml")
