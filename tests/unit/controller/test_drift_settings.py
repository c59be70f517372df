"""Drift settings: the watches.yaml keys, the CR annotations, which wins, and bad values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config import defaults
from ansible_operator.config.watches import GVK, Watch, WatchesError
from ansible_operator.controller.driftsettings import DriftSettings, settings_for
from ansible_operator.errors import BadAnnotation
from tests.unit.config import load_text, make_project

ENTRY = "- {version: v1, group: shop.example.org, kind: Basket, role: basket, %s}\n"
LABEL = "watches.yaml: entry 0 (shop.example.org/v1, Kind=Basket)"
PREFIX = "ansible.sdk.operatorframework.io/"


def cr(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "b", "namespace": "ns", "annotations": annotations}}


@pytest.mark.parametrize(
    ("keys", "period", "observe_only"),
    [
        ("reconcilePeriod: 1m", 0.0, False),
        ("driftCheckPeriod: 30s", 30.0, False),
        ("DRIFTCHECKPERIOD: 1m30s", 90.0, False),  # case-insensitive like the Go keys
        ("driftCheckPeriod: 0s", 0.0, False),
        ("observeOnly: true", defaults.OBSERVE_ONLY_DRIFT_CHECK_PERIOD, True),
        ("observeonly: true, driftCheckPeriod: 10s", 10.0, True),
        ("observeOnly: false, driftCheckPeriod: 10s", 10.0, False),
    ],
)
def test_watches_keys(tmp_path: Path, keys: str, period: float, observe_only: bool) -> None:
    [watch] = load_text(ENTRY % keys, make_project(tmp_path))
    assert (watch.drift_check_period, watch.observe_only) == (period, observe_only)


# Every bad value, in watches.yaml and in annotations: one line naming the key.
BAD_WATCH_VALUES = [
    ("driftCheckPeriod: soon", "driftCheckPeriod", 'time: invalid duration "soon"'),
    ("driftCheckPeriod: -5s", "driftCheckPeriod", "must not be negative, got -5s"),
    ("driftCheckPeriod: 5", "driftCheckPeriod", "expected a duration string"),
    ("observeOnly: maybe", "observeOnly", "cannot unmarshal string into Go struct field"),
]
BAD_ANNOTATIONS = [
    ("drift-check-period", "soon", 'Unable to parse drift check period annotation: time: invalid duration "soon"'),
    ("drift-check-period", "-1m", "Drift check period annotation must not be negative: '-1m'"),
    ("observe-only", "yes", "Unable to parse observe-only annotation: 'yes' is not \"true\" or \"false\""),
    ("observe-only", "", "Unable to parse observe-only annotation: '' is not \"true\" or \"false\""),
]  # fmt: skip


@pytest.mark.parametrize(("keys", "key", "problem"), BAD_WATCH_VALUES)
def test_bad_watches_values_name_the_file_entry_and_key(
    tmp_path: Path, keys: str, key: str, problem: str
) -> None:
    with pytest.raises(WatchesError) as caught:
        load_text(ENTRY % keys, make_project(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{LABEL}: {key}: ")
    assert problem in message


@pytest.mark.parametrize(("name", "value", "message"), BAD_ANNOTATIONS)
def test_bad_annotations_are_one_line_errors(name: str, value: str, message: str) -> None:
    with pytest.raises(BadAnnotation) as caught:
        settings_for(Watch(gvk=GVK("g", "v1", "K")), cr(**{PREFIX + name: value}))
    assert str(caught.value) == message


WATCHED = Watch(gvk=GVK("g", "v1", "K"), drift_check_period=60.0)
OBSERVING = Watch(
    gvk=GVK("g", "v1", "K"),
    observe_only=True,
    drift_check_period=defaults.OBSERVE_ONLY_DRIFT_CHECK_PERIOD,
)


@pytest.mark.parametrize(
    ("watch", "annotations", "expected"),
    [
        (Watch(gvk=GVK("g", "v1", "K")), {}, DriftSettings(0.0, False)),
        (WATCHED, {}, DriftSettings(60.0, False)),
        (WATCHED, {"drift-check-period": "5s"}, DriftSettings(5.0, False)),
        (WATCHED, {"drift-check-period": "0"}, DriftSettings(0.0, False)),
        (WATCHED, {"observe-only": "true"}, DriftSettings(60.0, True)),
        (OBSERVING, {"observe-only": "false"}, DriftSettings(300.0, False)),
        (OBSERVING, {"drift-check-period": "2s"}, DriftSettings(2.0, True)),
        (
            Watch(gvk=GVK("g", "v1", "K")),
            {"observe-only": "True"},
            DriftSettings(defaults.OBSERVE_ONLY_DRIFT_CHECK_PERIOD, True),
        ),
        (OBSERVING, {"drift-check-period": "0s"}, DriftSettings(300.0, True)),
    ],
)
def test_annotations_win_over_the_watch(
    watch: Watch, annotations: dict[str, str], expected: DriftSettings
) -> None:
    named = {PREFIX + key: value for key, value in annotations.items()}
    assert settings_for(watch, cr(**named)) == expected
