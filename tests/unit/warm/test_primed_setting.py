"""pbserver._primed_children: the AO_WARM_PRIMED_CHILDREN setting, good and bad values."""

from __future__ import annotations

from typing import NoReturn

import pytest

from ansible_operator.config import defaults
from ansible_operator.warm import pbserver
from ansible_operator.warm.protocol import Request


def _never(_fds: list[int], _request: Request) -> NoReturn:
    raise AssertionError("no run child is forked here")


@pytest.mark.parametrize(
    ("value", "limit", "complaint"),
    [
        pytest.param(None, defaults.WARM_PRIMED_CHILDREN, False, id="unset"),
        pytest.param("", defaults.WARM_PRIMED_CHILDREN, False, id="empty"),
        pytest.param("2", 2, False, id="a number"),
        pytest.param(" 3 ", 3, False, id="spaces around it"),
        pytest.param("0", None, False, id="zero turns them off"),
        pytest.param("many", defaults.WARM_PRIMED_CHILDREN, True, id="not a number"),
        pytest.param("-1", defaults.WARM_PRIMED_CHILDREN, True, id="negative"),
        pytest.param("1.5", defaults.WARM_PRIMED_CHILDREN, True, id="a fraction"),
        pytest.param("\u00b2", defaults.WARM_PRIMED_CHILDREN, True, id="a superscript digit"),
    ],
)
def test_the_limit_comes_from_the_environment(
    value: str | None,
    limit: int | None,
    complaint: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if value is None:
        monkeypatch.delenv(pbserver.PRIMED_ENV, raising=False)
    else:
        monkeypatch.setenv(pbserver.PRIMED_ENV, value)
    router = pbserver._primed_children(_never, base_path=[])
    if limit is None:
        assert router is None
    else:
        assert router is not None
        assert router._limit == limit
    said = capsys.readouterr().err
    assert (pbserver.PRIMED_ENV in said) is complaint
    if complaint:
        assert repr(value) in said
        assert "not a whole number" in said
