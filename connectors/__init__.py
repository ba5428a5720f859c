"""Executors and vendor connectors: exactly one side effect per approved action.

``executor.py`` runs the Kafka loop (transactions, offsets, fencing), ``runner.py`` the
per-action protocol (intent before effect, retries, reconciliation), and each connector
module one vendor. ``sandbox/`` holds local vendors that speak the real protocols.
"""

if __name__ != "runonce.connectors":  # the folder is runonce.connectors (runonce/connectors links here); one import path only
    raise ImportError(f"import runonce.connectors, not {__name__}: a second copy of these modules would have "
                      "Enums, settings and state of its own")
