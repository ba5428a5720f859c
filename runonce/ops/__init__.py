"""Operator and analyst tools behind the ``runonce`` command: the CLI (``cli``), the local
stack (``stack``), the demo, and readers of the topics analysts look at (``tail``, ``stats``)."""
