"""``runonce audit``: receipts exported from the cluster, and verified offline with only the
public keys (docs/receipts.md)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runonce.errors import ConfigError
from runonce.ops.commands import Adder, broker_time_ms, say
from runonce.settings import Settings

if TYPE_CHECKING:
    from runonce.receipts.files import Lines


def cmd_audit(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "export":
        from runonce.audit.receipts import Selection, export

        if not args.out:
            raise ConfigError("runonce audit export needs --out FILE (JSON lines)")
        now_ms = int(time.time() * 1000)
        selection = Selection(tenant=args.tenant, agent_id=args.agent,
                              since_ms=broker_time_ms(args.since, now_ms) if args.since else None,
                              until_ms=broker_time_ms(args.until, now_ms) if args.until else None)
        if selection.since_ms is not None and selection.until_ms is not None and selection.until_ms <= selection.since_ms:
            raise ConfigError(f"--until ({args.until}) must come after --since ({args.since})")
        receipts, checkpoints = export(settings.kafka_access(), Path(args.out), progress=say, selection=selection)
        if selection:
            print(f"{receipts:,} receipts in {args.out}, each with its signed checkpoint and audit path")
        else:
            print(f"{receipts:,} receipts and {checkpoints:,} checkpoints in {args.out}")
        return 0
    if args.action == "check":
        return check_online(settings, args.since or "24h", args.tenant)
    return verify_file(Path(args.receipts), [Path(k) for k in args.key or []])


def check_online(settings: Settings, since: str, tenant: str | None = None) -> int:
    """Receipts since ``since`` (a tenant's) held against the decisions and results on the
    topics; 1 when a record lacks its receipt or a receipt its record."""
    from runonce.audit.receipts import check
    from runonce.receipts.receipt import Kind

    found = check(settings.kafka_access(), broker_time_ms(since, int(time.time() * 1000)), progress=say, tenant=tenant)
    for kind, certified in ((Kind.DECISION, found.decisions), (Kind.OUTCOME, found.outcomes)):
        print(f"{kind.value} receipts since {since}: {found.receipts[kind]:,}; "
              + ("each record with exactly one, each receipt with its record" if certified.ok else certified.summary()))
    return 0 if found.ok else 1


def verify_file(receipts_file: Path, key_files: list[Path]) -> int:
    """Offline: no broker, the file and the public keys. 0 when every chain is verified or
    open (its last transaction's receipts not signed yet), every proof holds and every action
    performed was approved once; 1 on a gap, a tampered record, a receipt its proof does not
    prove, an outcome without its one approval (or a file with nothing in it)."""
    from runonce.receipts.cross import cross_check
    from runonce.receipts.signing import load_public_keys
    from runonce.receipts.verify import Verdict, verify

    if not key_files:
        raise ConfigError("runonce audit verify needs --key PUBLIC.pem (one for each key that signed)")
    if not receipts_file.is_file():
        raise ConfigError(f"{receipts_file}: no such file (runonce audit export --out writes one)")
    keys = load_public_keys(key_files)
    try:
        lines = _read(receipts_file)
    except ValueError as exc:
        print(f"tampered: {exc}")
        return 1
    unproven = [(proof, problem) for proof in lines.proofs for problem in [proof.problem(keys)] if problem]
    if lines.proofs:  # a filtered export (or an agent's own): each receipt alone, under its signed root
        for proof, problem in unproven[:10]:
            print(f"not proven: {problem}")
        print(f"{len(lines.proofs):,} receipts, each proven alone under its signed checkpoint: "
              + (f"{len(unproven):,} NOT PROVEN" if unproven else "every one proven")
              + " (a filtered export: its chains are not whole, so their continuity is not checked)")
    if not lines.receipts and not lines.checkpoints:
        return 1 if unproven or not lines.proofs else 0
    reports = verify(lines.receipts, lines.checkpoints, keys)
    for r in reports:
        signed = f"signed through #{r.signed_through}" if r.signed_through is not None else "nothing signed"
        print(f"{r.chain}: {r.verdict.value}, {r.receipts:,} receipts, {signed}" + (f": {r.problem}" if r.problem else ""))
    bad = [r for r in reports if r.verdict in (Verdict.GAP, Verdict.TAMPERED)]
    print(f"{len(reports)} chains, {sum(r.receipts for r in reports):,} receipts: "
          + (f"{len(bad)} NOT VERIFIED" if bad else "every chain intact"))
    across = cross_check(lines.receipts)
    for problem in across.problems():
        print(f"across chains: {problem}")
    print(f"{across.outcomes:,} actions performed: " + ("each approved exactly once (a held one by its approver)"
                                                        if across.ok else "NOT each approved exactly once"))
    return 1 if bad or unproven or not across.ok else 0


def _read(receipts_file: Path) -> Lines:
    """A file ``runonce audit export`` wrote: JSON lines, or Parquet (a row a proof). A whole
    export's rows are read as its chains, their checkpoints once each (each checkpoint's
    signature checked once, not once a row)."""
    from runonce.receipts.files import Lines, read_lines

    if receipts_file.suffix != ".parquet":
        with receipts_file.open("rb") as f:
            return read_lines(f, str(receipts_file))
    from runonce.audit.parquet import read_proofs

    proofs, whole = read_proofs(receipts_file)
    if not whole:
        return Lines(proofs=proofs)
    checkpoints = {(p.inclusion.checkpoint.chain, p.inclusion.checkpoint.first_seq): p.inclusion.checkpoint
                   for p in proofs}
    return Lines([p.receipt for p in proofs], list(checkpoints.values()))


def add_commands(add: Adder) -> None:
    p = add("audit", cmd_audit, "Receipts: export them from the cluster, verify a file of them offline with "
                                "the public keys alone, or check them online against the records. Example: "
                                "runonce audit export --out receipts.jsonl; "
                                "runonce audit verify --receipts receipts.jsonl --key receipts.pub.pem")
    p.add_argument("action", choices=["export", "verify", "check"],
                   help="export: receipts to a file; verify: a file, offline, with the public keys; check: online, "
                        "the receipts since --since held against the decisions and results on the topics")
    p.add_argument("--out", help="export: the file to write: JSON lines (each receipt's and checkpoint's canonical "
                                 "bytes, a line each), or Parquet when it ends .parquet (a row a receipt, with its "
                                 "signed checkpoint and audit path)")
    p.add_argument("--tenant", help="export: only this tenant's receipts, each with its proof (the others' stay out); "
                                    "check: only this tenant's")
    p.add_argument("--agent", help="export: only this agent's receipts, each with its proof")
    p.add_argument("--since", help="export: segments written from this broker time: ISO 8601 or a duration ago "
                                   "(24h); each receipt with its proof. check: from when (default 24h; within the "
                                   "topics' retention, 30 days)")
    p.add_argument("--until", help="export: up to this broker time (same forms as --since)")
    p.add_argument("--receipts", default="receipts.jsonl",
                   help="verify: the exported file, JSON lines or .parquet (default receipts.jsonl)")
    p.add_argument("--key", action="append", help="verify: a PEM public key that signed checkpoints "
                                                  "(`openssl pkey -in receipts.pem -pubout`); repeat for rotated keys")
