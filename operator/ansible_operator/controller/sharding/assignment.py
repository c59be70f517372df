"""Which member owns which custom resource: rendezvous hashing with bounded loads.

Called by controller.sharding.shard (the coordinator) whenever the member set
or the set of known CRs changes. Pure and deterministic: the result depends
only on the member names and the CRs' (creation order, key), which every
replica sees alike, so replicas agree without talking to each other.

The rule, for CRs taken in creation order (creationTimestamp, then key): the
i-th CR (counting from 1) goes to the highest-ranked member, by a 64-bit hash
of (member, CR key), that holds fewer than ceil(i * load_factor / members)
CRs so far. Without the bound this is plain rendezvous (highest random
weight) hashing: when a member joins or leaves, only the CRs it wins or held
move. The bound keeps every member within `load_factor` of the mean at every
prefix of the order, so a member never owns more than
ceil(n * load_factor / members) of n CRs. Because the bound of CR i depends
only on i, a CR created after all others never moves any earlier one: a
burst of creations causes no handovers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ansible_operator.controller.contract import Key


@dataclass(frozen=True, slots=True, order=True)
class Placed:
    """A CR as the assignment orders it: by creation time, then by key."""

    created: str  # metadata.creationTimestamp (RFC 3339, so it sorts as text)
    queue: str
    namespace: str
    name: str

    @property
    def key(self) -> Key:
        return Key(controller=self.queue, namespace=self.namespace, name=self.name)


def placed(key: Key, created: str) -> Placed:
    return Placed(created=created, queue=key.controller, namespace=key.namespace, name=key.name)


def score(member: str, key: Key) -> int:
    """The rendezvous weight of `member` for `key` (higher wins)."""
    text = f"{member}\0{key.controller}\0{key.namespace}\0{key.name}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


class Assignment:
    """The owner of each CR for one member set; see the module docstring."""

    def __init__(self, members: Sequence[str], *, load_factor: float) -> None:
        if load_factor < 1.0:
            raise ValueError(f"the load factor must be at least 1.0, got {load_factor}")
        self.members = tuple(sorted(set(members)))
        self.load_factor = load_factor
        self.owner: dict[Key, str] = {}
        self.load: dict[str, int] = dict.fromkeys(self.members, 0)
        self._last: Placed | None = None

    def __len__(self) -> int:
        return len(self.owner)

    def cap(self, position: int) -> int:
        """Most CRs one member may hold among the first `position` CRs."""
        return max(1, math.ceil(position * self.load_factor / max(1, len(self.members))))

    def can_append(self, item: Placed) -> bool:
        """True if `item` sorts after every CR placed so far (then `append` is exact)."""
        return self._last is None or item > self._last

    def append(self, item: Placed) -> str | None:
        """Place `item`, which must sort after all placed CRs; its owner (None: no members)."""
        if not self.members:
            return None
        key = item.key
        limit = self.cap(len(self.owner) + 1)
        ranked = sorted(self.members, key=lambda member: score(member, key), reverse=True)
        chosen = next((m for m in ranked if self.load[m] < limit), ranked[0])
        self.owner[key] = chosen
        self.load[chosen] += 1
        self._last = item
        return chosen


def assign(members: Sequence[str], items: Iterable[Placed], *, load_factor: float) -> Assignment:
    """The assignment of all `items` over `members` (see the module docstring)."""
    result = Assignment(members, load_factor=load_factor)
    for item in sorted(set(items)):
        result.append(item)
    return result
