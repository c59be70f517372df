"""Which HTTP headers the API proxy copies between a run and the API server.

Used by proxy.handler, for requests (run to API server) and responses (back).
Hop-by-hop headers describe one connection, not the message, and the proxy
sets some itself (the Authorization of the operator's identity, by
kube.upstream), so they are never copied from one side to the other.
"""

from __future__ import annotations

from collections.abc import Iterable

# Headers that describe one connection hop, not the message (RFC 9110 §7.6.1),
# plus those the proxy sets itself. Never copied from one side to the other.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
    }
)


def copy_headers(
    items: Iterable[tuple[str, str]], *, connection: str = "", drop: Iterable[str] = ()
) -> dict[str, str]:
    """End-to-end headers of `items`, without hop-by-hop ones and those named in `drop`.

    `connection` is the message's Connection header: the headers it names are
    hop-by-hop too.
    """
    skip = HOP_BY_HOP | {d.lower() for d in drop}
    skip |= {t.strip().lower() for t in connection.split(",") if t.strip()}
    kept: dict[str, str] = {}
    for name, value in items:
        if name.lower() in skip:
            continue
        # Repeated headers (Accept, Impersonate-Group) are folded as HTTP allows.
        kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept
