"""runonce's work as spans in an agent team's own trace (OpenTelemetry): the submit, the
decision, the execution of the tool. Off unless the process has a tracer provider: an agent
application's own, or, in runonce's processes, the one ``configure_from_env`` makes from the
standard ``OTEL_*`` variables with ``runonce[otel]`` installed. Off costs nothing per record
but copying the caller's context headers (wire/trace.py).

``spans.py``: the contract and the default that does nothing; ``otel.py``: the spans, on
OpenTelemetry's API (imported only when a provider is there); ``setup.py``: the provider of
runonce's own processes; ``handoff.py`` and ``exporter.py``: the stream worker's spans, made
by an exporter process of its own off the decision path; ``configured.py`` picks."""
