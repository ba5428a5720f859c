"""``runonce audit``: receipts exported from the cluster, and verified offline with only the
public keys (docs/receipts.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from runonce.errors import ConfigError
from runonce.ops.commands import Adder, say
from runonce.settings import Settings


def cmd_audit(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "export":
        from runonce.audit.receipts import export

        if not args.out:
            raise ConfigError("runonce audit export needs --out FILE (JSON lines)")
        receipts, checkpoints = export(settings.kafka_access(), Path(args.out), progress=say)
        print(f"{receipts:,} receipts and {checkpoints:,} checkpoints in {args.out}")
        return 0
    return verify_file(Path(args.receipts), [Path(k) for k in args.key or []])


def verify_file(receipts_file: Path, key_files: list[Path]) -> int:
    """Offline: no broker, the file and the public keys. 0 when every chain is verified or
    open (its last transaction's receipts not signed yet), 1 on a gap or a tampered record."""
    from runonce.receipts.files import read_lines
    from runonce.receipts.signing import load_public_keys
    from runonce.receipts.verify import Verdict, verify

    if not key_files:
        raise ConfigError("runonce audit verify needs --key PUBLIC.pem (one for each key that signed)")
    if not receipts_file.is_file():
        raise ConfigError(f"{receipts_file}: no such file (runonce audit export --out writes one)")
    keys = load_public_keys(key_files)
    try:
        with receipts_file.open("rb") as f:
            receipts, checkpoints = read_lines(f, str(receipts_file))
    except ValueError as exc:
        print(f"tampered: {exc}")
        return 1
    reports = verify(receipts, checkpoints, keys)
    for r in reports:
        signed = f"signed through #{r.signed_through}" if r.signed_through is not None else "nothing signed"
        print(f"{r.chain}: {r.verdict.value}, {r.receipts:,} receipts, {signed}" + (f": {r.problem}" if r.problem else ""))
    bad = [r for r in reports if r.verdict in (Verdict.GAP, Verdict.TAMPERED)]
    print(f"{len(reports)} chains, {sum(r.receipts for r in reports):,} receipts: "
          + (f"{len(bad)} NOT VERIFIED" if bad else "every chain intact"))
    return 1 if bad else 0


def add_commands(add: Adder) -> None:
    p = add("audit", cmd_audit, "Receipts: export them from the cluster, or verify a file of them offline with "
                                "the public keys alone. Example: runonce audit export --out receipts.jsonl; "
                                "runonce audit verify --receipts receipts.jsonl --key receipts.pub.pem")
    p.add_argument("action", choices=["export", "verify"])
    p.add_argument("--out", help="export: the file to write (JSON lines: each receipt's and checkpoint's canonical "
                                 "bytes, a line each)")
    p.add_argument("--receipts", default="receipts.jsonl", help="verify: the exported file (default receipts.jsonl)")
    p.add_argument("--key", action="append", help="verify: a PEM public key that signed checkpoints "
                                                  "(`openssl pkey -in receipts.pem -pubout`); repeat for rotated keys")
