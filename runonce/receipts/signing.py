"""Signed checkpoints: at each checkpoint of a chain (every N receipts or T seconds), the
Merkle root over the receipts since the last one, signed with Ed25519 (``cryptography``).

A key is named by its id, the first 16 hex digits of SHA-256 over its raw public key, so keys
rotate by id: a checkpoint names the key that signed it and a verifier holds every public key
it accepts. A private key is read from a file (PEM PKCS#8, as ``openssl genpkey -algorithm
ed25519`` writes it, or its 32 raw bytes) and never printed: errors name the file, not its
content."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from runonce.receipts import merkle
from runonce.receipts.canonical import Value, canonical_bytes
from runonce.receipts.receipt import Receipt


class KeyFileError(ValueError):
    """A key file that holds no Ed25519 key (named by its path only)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    chain: str
    #: the receipts it signs: ``first_seq`` .. ``last_seq`` of its chain, the leaves of ``root``
    first_seq: int
    last_seq: int
    #: hex Merkle root (merkle.py) over those receipts' canonical bytes, in seq order
    root: str
    #: the digest of receipt ``last_seq``: the root tied to the chain
    last_digest: str
    signed_at_ms: int
    key_id: str
    #: hex Ed25519 signature over the canonical bytes of every field above
    signature: str = ""

    def signed_part(self) -> bytes:
        fields: dict[str, Value] = dict(asdict(self))
        del fields["signature"]
        return canonical_bytes(fields)

    def to_json(self) -> dict[str, Value]:
        return dict(asdict(self))


def key_id_of(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class Signer:
    """Signs checkpoints with one private key."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = key.public_key()
        self.key_id = key_id_of(self.public)

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        data = path.read_bytes()
        try:
            if len(data) == 32:
                return cls(Ed25519PrivateKey.from_private_bytes(data))
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise KeyFileError(f"{path}: not an Ed25519 private key (PEM PKCS#8 or 32 raw bytes)") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"{path}: a {type(key).__name__.removeprefix('_')}, not an Ed25519 private key")
        return cls(key)

    def __repr__(self) -> str:  # never the key
        return f"Signer(key_id={self.key_id})"

    def checkpoint(self, receipts: Sequence[Receipt], signed_at_ms: int) -> Checkpoint:
        """The signed root over ``receipts``: consecutive on one chain, in seq order."""
        if not receipts:
            raise ValueError("a checkpoint of no receipts")
        data = [r.to_bytes() for r in receipts]
        return self.checkpoint_over(receipts[0].chain, receipts[0].seq, data, hashlib.sha256(data[-1]).hexdigest(),
                                    signed_at_ms)

    def checkpoint_over(self, chain: str, first_seq: int, encoded: Sequence[bytes], last_digest: str,
                        signed_at_ms: int) -> Checkpoint:
        """The signed root over the receipts of ``chain`` from ``first_seq`` whose canonical bytes
        are ``encoded`` (the last one's digest ``last_digest``)."""
        if not encoded:
            raise ValueError("a checkpoint of no receipts")
        unsigned = Checkpoint(chain, first_seq, first_seq + len(encoded) - 1,
                              merkle.root([merkle.leaf_hash(d) for d in encoded]).hex(), last_digest, signed_at_ms,
                              self.key_id)
        return Checkpoint(**{**asdict(unsigned), "signature": self._key.sign(unsigned.signed_part()).hex()})


def public_key_pem(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public_keys(paths: Sequence[Path]) -> dict[str, Ed25519PublicKey]:
    """key id -> public key, from PEM files (``openssl pkey -pubout``)."""
    keys: dict[str, Ed25519PublicKey] = {}
    for path in paths:
        try:
            key = serialization.load_pem_public_key(path.read_bytes())
        except ValueError:
            raise KeyFileError(f"{path}: not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"{path}: not an Ed25519 public key")
        keys[key_id_of(key)] = key
    return keys


def signature_problem(checkpoint: Checkpoint, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why ``checkpoint``'s signature does not hold, or None."""
    key = keys.get(checkpoint.key_id)
    if key is None:
        return f"signed by key {checkpoint.key_id}, which is not one of the {len(keys)} keys given"
    try:
        key.verify(bytes.fromhex(checkpoint.signature), checkpoint.signed_part())
    except (InvalidSignature, ValueError):
        return f"its signature does not hold for key {checkpoint.key_id}"
    return None
