"""Label selectors of watches.yaml (`selector:`), validated when the file is loaded.

:mod:`ansible_operator.config.watches` builds a :class:`LabelSelector` for each
entry that has a non-empty `selector` (load time: controller start-up and
`ansible-operator validate`); the controller later asks it :meth:`~LabelSelector.matches`
for events and :meth:`~LabelSelector.to_query` for list/watch requests.

The rules are Kubernetes' (apimachinery `LabelSelectorAsSelector`): operators
In/NotIn need values, Exists/DoesNotExist take none, keys are qualified names
and values are label values. The Go operator checks them only when it builds
its controllers and then exits; we refuse the file up front instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_MAX = 63
_PREFIX_MAX = 253


class SelectorError(ValueError):
    """An invalid selector; `path` locates the culprit inside it (e.g. `matchLabels.app`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _go_quote(text: str) -> str:
    # Close enough to Go's %q for the operator names that can appear here.
    return json.dumps(text, ensure_ascii=False)


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if "/" in prefix:
        return "a label key has at most one '/'"
    if prefix and (len(prefix) > _PREFIX_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return (
            f"the prefix {prefix!r} must be a lowercase DNS subdomain of at most "
            f"{_PREFIX_MAX} characters"
        )
    if not name:
        return "the name part must not be empty"
    if len(name) > _NAME_MAX or not _NAME.fullmatch(name):
        return (
            f"the name part {name!r} must be at most {_NAME_MAX} characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def _value_problem(value: str) -> str | None:
    if value and (len(value) > _NAME_MAX or not _NAME.fullmatch(value)):
        return (
            f"label value {value!r} must be empty or at most {_NAME_MAX} characters of letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def _check_key(path: str, key: str) -> None:
    problem = _key_problem(key)
    if problem is not None:
        raise SelectorError(path, f"invalid label key {key!r}: {problem}")


@dataclass(frozen=True)
class Requirement:
    """One `matchExpressions` item: `key` `operator` `values`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operator not in OPERATORS:
            raise SelectorError(
                "operator",
                f"{_go_quote(self.operator)} is not a valid label selector operator "
                f"(use one of {', '.join(OPERATORS)})",
            )
        _check_key("key", self.key)
        if self.operator in {"In", "NotIn"} and not self.values:
            raise SelectorError("values", f"operator {self.operator} needs at least one value")
        if self.operator in {"Exists", "DoesNotExist"} and self.values:
            raise SelectorError("values", f"operator {self.operator} takes no values")
        for index, value in enumerate(self.values):
            problem = _value_problem(value)
            if problem is not None:
                raise SelectorError(f"values[{index}]", problem)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` satisfy this requirement (NotIn is true when the label is absent)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present

    def to_query(self) -> str:
        """This requirement in the label-selector query syntax (`k in (a,b)`, `!k`)."""
        values = ",".join(sorted(set(self.values)))
        if self.operator == "In":
            return f"{self.key} in ({values})"
        if self.operator == "NotIn":
            return f"{self.key} notin ({values})"
        if self.operator == "Exists":
            return self.key
        return f"!{self.key}"


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector: every `match_labels` pair and every expression must hold."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        for key, value in self.match_labels.items():
            _check_key(f"matchLabels.{key}", key)
            problem = _value_problem(value)
            if problem is not None:
                raise SelectorError(f"matchLabels.{key}", problem)

    @property
    def is_empty(self) -> bool:
        """An empty selector selects everything."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object carrying `labels` is selected."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)

    def to_query(self) -> str:
        """The `labelSelector=` query value (unescaped; the HTTP client encodes it).

        Requirements are sorted by key, and values inside `in (...)` sorted, so
        the same selector always renders the same text (as apimachinery does).
        """
        parts = [(key, f"{key}={self.match_labels[key]}") for key in sorted(self.match_labels)]
        parts.extend((req.key, req.to_query()) for req in self.match_expressions)
        parts.sort(key=lambda part: part[0])
        return ",".join(text for _, text in parts)


def selector_from_state(state: Mapping[str, Any]) -> LabelSelector | None:
    """A selector from its decoded watches.yaml form; None when it selects everything.

    `state` has the keys `matchLabels` (str -> str) and `matchExpressions`
    (items with `key`, `operator`, `values`), as :mod:`.gojson` decodes them.
    Raises SelectorError whose `path` is relative to `selector`.
    """
    expressions = []
    for index, item in enumerate(state.get("matchExpressions") or ()):
        try:
            requirement = Requirement(
                item.get("key") or "", item.get("operator") or "", tuple(item.get("values") or ())
            )
        except SelectorError as error:
            raise SelectorError(f"matchExpressions[{index}].{error.path}", error.message) from None
        expressions.append(requirement)
    selector = LabelSelector(dict(state.get("matchLabels") or {}), tuple(expressions))
    return None if selector.is_empty else selector
