"""config: what the operator is told to do, read and checked before anything runs.

The bottom layer above `errors` (see the ansible_operator package docstring).
The controller calls :func:`load_watches` once at start-up and the
`ansible-operator validate` command calls it to report on a file (one
:func:`summarize` line per watch); a :class:`WatchesError` (a ConfigError)
stops either with a message naming the file, entry, key and problem.

Modules, in the order a load uses them:

    defaults      every default of the operator (watches keys and `run` flags)
    envexpand     $VAR expansion over the raw file; per-kind environment overrides
    goyaml        YAML 1.1 parsed with go-yaml v2's scalar rules
    gojson        decoding onto the Go operator's struct, with its quirks and wording
    ansiblepaths  where roles and playbooks are found
    selectors     label selectors, validated at load time
    watches       the pipeline: load_watches
    watchmodel    what it returns: Watch, Finalizer, GVK, WatchesError; summaries
    durations     Go duration strings, shared with flags and annotations
"""

from ansible_operator.config.durations import DurationError, format_go_duration, parse_go_duration
from ansible_operator.config.envexpand import expand_env
from ansible_operator.config.selectors import LabelSelector, Requirement, SelectorError
from ansible_operator.config.watches import (
    GVK,
    Finalizer,
    Watch,
    WatchesError,
    load_watches,
    summarize,
)

__all__ = [
    "GVK",
    "DurationError",
    "Finalizer",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "Watch",
    "WatchesError",
    "expand_env",
    "format_go_duration",
    "load_watches",
    "parse_go_duration",
    "summarize",
]
