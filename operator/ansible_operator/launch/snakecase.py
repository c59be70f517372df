"""snake_case conversion of custom-resource keys, exactly as the Go ansible-operator does it.

Where this sits: before every Ansible run launch/extravars.py builds the run's
extra vars; when the watch has `snakeCaseParameters: true` (the default) it copies
the CR's `spec` with `snake_pairs` as the key conversion, so a role reads
`spec.replicaCount` as `replica_count`. Nothing else in the operator calls this
module (`map_to_snake` is the same conversion on its own, for tests and tools).

Roles written for the Go operator depend on the precise spelling it produces,
quirks included (`URL` becomes `__url`, `aB` becomes `ab`, `HTTPSProxy` becomes
`http_s_proxy`), so `to_snake` reproduces that algorithm result for result rather
than implementing a "sensible" snake_case. Two places where the Go code has no
well-defined answer are settled here instead:

* An empty key, or one made only of spaces, makes the Go conversion panic and
  the reconcile fail forever. Such a key is returned unchanged.
* When two keys of one map convert to the same name (`fooBar` and `foo_bar`),
  Go keeps whichever its randomised map iteration visits last. Here the outcome
  is fixed: a key that is already spelled exactly like the converted name wins
  (the author wrote the name the role reads); among the others, the key that
  sorts first by code point wins. See `map_to_snake`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from ansible_operator.launch.jsontree import rebuild

__all__ = ["go_lower", "map_to_snake", "snake_pairs", "to_snake"]

_log = logging.getLogger(__name__)

# A letter, a run of ASCII digits, then a letter followed by more digits ("a1b2"):
# Go's RE2 `\d` is ASCII-only, hence [0-9] rather than Python's Unicode-aware \d.
_LETTER_DIGITS_LETTER_DIGITS = re.compile(r"([a-zA-Z])([0-9]+)([a-zA-Z][0-9]+)")

# Acronyms that get underscores around their first occurrence. The Go code walks a
# map, so it visits them in a random order; that cannot change the result (no two of
# them overlap, and the "_" and "S" the step inserts are part of none of them), so a
# fixed order is used.
_ACRONYMS = ("HTTP", "URL", "IP")
_ACRONYMS_LOWER = frozenset(word.lower() for word in _ACRONYMS)

_DELIMITERS = frozenset(" _-")


def go_lower(text: str) -> str:
    """Lower-case `text` the way Go's strings.ToLower does (one code point at a time).

    Python's str.lower applies Unicode's context-sensitive rules (a final capital
    sigma becomes "ς") and a two-character mapping for "İ"; Go maps each code point
    on its own, so the non-ASCII path goes character by character.
    """
    if text.isascii():
        return text.lower()
    return "".join(_lower_code_point(char) for char in text)


def _lower_code_point(char: str) -> str:
    lowered = char.lower()
    # U+0130 is the only code point whose full lower-case mapping is longer than one
    # character; its simple mapping, the one Go uses, is a plain "i".
    return lowered if len(lowered) == 1 else lowered[0]


def to_snake(key: str) -> str:
    """The Go operator's snake_case spelling of one key (`paramconv.ToSnake`).

    An empty key or one made only of spaces is returned as it is (Go panics).
    """
    text = _LETTER_DIGITS_LETTER_DIGITS.sub(r"\1 \2 \3", key).strip(" ")
    if not text:
        return key
    # Decided on the trimmed text before acronyms are isolated, as in the reference.
    prefix = "_" if "A" <= text[0] <= "Z" else ""
    for acronym in _ACRONYMS:
        text = _isolate_acronym(text, acronym)
    words = _split_words(text)
    joined = "_".join(words)
    # A key that starts with one of the acronyms gets no leading underscore.
    return joined if words[0] in _ACRONYMS_LOWER else prefix + joined


def _isolate_acronym(text: str, acronym: str) -> str:
    """Put underscores around the first occurrence of `acronym`.

    A lower-case "s" right after it is taken as a plural and upper-cased so that
    the word splitter keeps it with the acronym ("IPs" stays one word).
    """
    start = text.find(acronym)
    if start < 0:
        return text
    head, word, tail = text[:start], acronym, text[start + len(acronym) :]
    if tail.startswith("s"):
        word, tail = word + "S", tail[1:]
    if not tail:
        return f"{head}_{word}"
    if start == 0:
        return f"{word}_{tail}"
    return f"{head}_{word}_{tail}"


def _is_upper(char: str) -> bool:
    return "A" <= char <= "Z"


def _is_lower(char: str) -> bool:
    return "a" <= char <= "z"


def _split_words(text: str) -> list[str]:
    """Cut `text` into lower-cased words at delimiters and ASCII case changes.

    `length` counts the characters taken into the current word minus one (-1 right
    after a cut); a case change only cuts once the word has a character before the
    current one, which is what makes "aB" a single word and "JSONData" two.
    """
    words: list[str] = []
    current = ""
    length = -1
    last = len(text) - 1
    for index, char in enumerate(text):
        length += 1
        following = text[index + 1] if index < last else ""
        case_changes = (_is_upper(char) and _is_lower(following)) or (
            _is_lower(char) and _is_upper(following)
        )
        # The Go code also requires that the word so far does not end in "_"; that
        # can never happen because "_" is always a delimiter, so it is not checked.
        if length > 0 and case_changes:
            if _is_upper(char):
                # "JSONData": the capital before the lower-case run starts a new word.
                words.append(go_lower(current))
                current, length = char, 0
            else:
                # "fooBar": the lower-case letter ends the word.
                words.append(go_lower(current + char))
                current, length = "", -1
        elif char in _DELIMITERS:
            words.append(go_lower(current))
            current, length = "", -1
        else:
            current += char
    words.append(go_lower(current))
    return words


def map_to_snake(value: Any) -> Any:
    """`value` with the keys of every map in it snake_cased, at every depth, including in lists.

    Values are never changed. Any Mapping becomes a plain dict and any list or tuple
    a list. Keys that are not strings (they cannot come from JSON) are kept. The
    walk is iterative (launch.jsontree.rebuild), so no depth raises RecursionError.

    When several keys of one map convert to the same name, exactly one survives:
    the key already spelled like the converted name if there is one, otherwise the
    key that sorts first. The result therefore never depends on the input's order.
    """
    return rebuild(value, pairs=snake_pairs)


def snake_pairs(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """The (converted key, value) pairs of one map's copy, collisions settled."""
    source_of: dict[Any, Any] = {}
    for original in mapping:
        converted = to_snake(original) if isinstance(original, str) else original
        if converted not in source_of:
            source_of[converted] = original
            continue
        kept = _collision_winner(source_of[converted], original, converted)
        dropped = original if kept == source_of[converted] else source_of[converted]
        _log.warning(
            "spec keys %r and %r both become %r; using the value of %r",
            kept,
            dropped,
            converted,
            kept,
        )
        source_of[converted] = kept
    return [(converted, mapping[key]) for converted, key in source_of.items()]


def _collision_winner(first: str, second: str, converted: str) -> str:
    if first == converted:
        return first
    if second == converted:
        return second
    return min(first, second)
