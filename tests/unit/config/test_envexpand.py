"""Environment expansion over the raw watches.yaml text, row by row of Go's os.Expand grammar."""

from __future__ import annotations

import pytest

from ansible_operator.config.envexpand import expand_env

ENV = {"NAME": "value", "EMPTY": "", "a.b": "dotted", "WITH_1": "one", "$": "dollar"}

CASES = [
    # defined variables, both spellings
    ("x: ${NAME}", "x: value"),
    ("x: $NAME", "x: value"),
    ("x: $NAME.suffix", "x: value.suffix"),
    ("x: $WITH_1/tail", "x: one/tail"),
    # set but empty gives the empty string, not the reference
    ("x: '${EMPTY}'", "x: ''"),
    ("x: '$EMPTY'", "x: ''"),
    # undefined: written back in braces, even when it was $NAME
    ("x: ${UNSET}", "x: ${UNSET}"),
    ("x: $UNSET", "x: ${UNSET}"),
    ("x: $UNSET-more", "x: ${UNSET}-more"),
    # ${} is bad syntax and disappears; an unclosed ${ loses just those two characters
    ("x: a${}b", "x: ab"),
    ("x: a${NAME", "x: aNAME"),
    ("x: ${", "x: "),
    # a $ not followed by a name character stays
    ("x: a $ b", "x: a $ b"),
    ("x: $.5", "x: $.5"),
    ('x: "$"', 'x: "$"'),
    ("x: $/path", "x: $/path"),
    ("x: $:", "x: $:"),
    ("x: price in $é", "x: price in $é"),
    # a $ at the very end of the text stays
    ("x: cost$", "x: cost$"),
    # one-character special names are looked up, and undefined ones braced
    ("pw: pa$$word", "pw: padollarword"),
    ("x: $1st", "x: ${1}st"),
    ("x: $*", "x: ${*}"),
    ("x: $#", "x: ${#}"),
    ("x: $@", "x: ${@}"),
    ("x: $!", "x: ${!}"),
    ("x: $?", "x: ${?}"),
    ("x: $-", "x: ${-}"),
    ("x: $0", "x: ${0}"),
    ("x: ${9}", "x: ${9}"),
    # anything up to } is the name
    ("x: ${a.b}", "x: dotted"),
    ("x: ${not set}", "x: ${not set}"),
    ("x: ${$}", "x: dollar"),
    # several on a line, and across lines (comments too)
    ("# $NAME\na: ${NAME}-$NAME", "# value\na: value-value"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_expansion(text: str, expected: str) -> None:
    assert expand_env(text, ENV) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pw: pa$$word", "pw: pa${$}word"),
        ("x: ${$}", "x: ${$}"),
        ("x: $$$", "x: ${$}$"),
    ],
)
def test_double_dollar_without_a_dollar_variable(text: str, expected: str) -> None:
    # The usual case: nobody defines a variable named "$".
    assert expand_env(text, {}) == expected


def test_text_without_references_is_returned_unchanged() -> None:
    text = "- version: v1\n  kind: Basket\n"
    assert expand_env(text, ENV) == text


def test_values_are_inserted_raw_and_may_add_yaml() -> None:
    assert expand_env("vars: $BLOCK", {"BLOCK": "{a: 1}"}) == "vars: {a: 1}"
