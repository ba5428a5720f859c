"""Executors and vendor connectors: exactly one side effect per approved action.

``executor.py`` runs the Kafka loop (transactions, offsets, fencing), ``runner.py`` the
per-action protocol (intent before effect, retries, reconciliation), and each connector
module one vendor. ``sandbox/`` holds local vendors that speak the real protocols.
"""
