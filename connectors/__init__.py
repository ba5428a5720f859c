"""Executors and vendor connectors: exactly one side effect per approved action. Three rooms:

- ``toolkit/``: what a connector is made of, and all a plugin author imports: the contract
  (``base``), the four errors a vendor's answer becomes (``errors``), the connectors file's
  fields (``config``), secrets, TLS and the one HTTP/SMTP seam (``transport``);
- ``vendors/``: one module per kind runonce ships, built from the toolkit alone, and
  ``vendors/sandbox/``, local servers that speak each vendor's protocol and keep a ledger;
- ``executor/``: the Kafka loop that performs approved actions through a connector (intent
  before effect, retries, reconciliation, the results index, the pace toward a vendor) and
  the registry that builds a vendor from its table.

``testing.py`` (the ``replay`` fixture) runs a connector as the executor does, against the
sandboxes. The import contract in pyproject.toml keeps the rooms in that order.
"""

if __name__ != "runonce.connectors":  # the folder is runonce.connectors (runonce/connectors links here); one import path only
    raise ImportError(f"import runonce.connectors, not {__name__}: a second copy of these modules would have "
                      "Enums, settings and state of its own")
