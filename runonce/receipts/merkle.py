"""Merkle trees as RFC 9162 (Certificate Transparency 2.0, section 2.1) defines them: a leaf
is SHA-256(0x00 || its bytes), a node SHA-256(0x01 || left || right), a tree of n leaves split
at the largest power of two below n. An inclusion proof is the audit path of section 2.1.3,
checked by its verification algorithm: any CT library checks runonce's proofs."""

from __future__ import annotations

import hashlib
from typing import Sequence


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """The tree hash of these leaf hashes (the empty tree's: SHA-256 of nothing)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    # bottom-up, carrying an odd node up unpaired: the same tree as the RFC's recursive split
    while len(level) > 1:
        level = [_node(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0]


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """The audit path of leaf ``index`` (RFC 9162 2.1.3.1)."""
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf {index} of {len(leaves)}")
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return inclusion_proof(index, leaves[:k]) + [root(leaves[k:])]
    return inclusion_proof(index - k, leaves[k:]) + [root(leaves[:k])]


def inclusion_proofs(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """The audit path of every leaf, each subtree hashed once (``inclusion_proof`` of each
    would hash the tree again for every leaf)."""
    if not leaves:
        return []
    return _paths(list(leaves))[1]


def _paths(leaves: list[bytes]) -> tuple[bytes, list[list[bytes]]]:
    if len(leaves) == 1:
        return leaves[0], [[]]
    k = _split(len(leaves))
    left, left_paths = _paths(leaves[:k])
    right, right_paths = _paths(leaves[k:])
    return _node(left, right), [p + [right] for p in left_paths] + [p + [left] for p in right_paths]


def root_from_proof(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root a leaf and its audit path make (RFC 9162 2.1.3.2), or None when the path
    cannot belong to a tree of ``size`` leaves."""
    if not 0 <= index < size:
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None
