"""Every bound on what an agent may send, in one place (docs/design-notes.md, "Bad input", lists them).

Why these numbers: with every field within its bound, every record the stream job writes for
an accepted request (the decision, which carries the request whole; a stage-1 hand-off; the
state of its key or scope) fits ``MAX_OUTPUT_BYTES``, the limit of the topics it goes to
(tests/unit/test_hostile_input.py holds that as a property). A request past any bound is a
dead letter naming the field, never a write the broker refuses.
"""

from __future__ import annotations

MAX_ACTION_ID_CHARS = 128
MAX_AGENT_ID_CHARS = 256
#: a tenant's name (core/tenant.py)
MAX_TENANT_CHARS = 128
MAX_TOOL_CHARS = 128
#: the caller's idempotency key
MAX_KEY_CHARS = 512
#: an explicit natural id
MAX_NATURAL_ID_CHARS = 512
#: params_json, UTF-8 encoded
MAX_PARAMS_BYTES = 256 * 1024
#: an HTTP request body at the gateway (params as JSON, whitespace and all): refused with 413
#: from its Content-Length, or once reading passes it, never read whole
MAX_REQUEST_BODY_BYTES = 2 * MAX_PARAMS_BYTES
#: objects and arrays nested in params_json (``{"a": [1]}`` is 2 deep)
MAX_JSON_DEPTH = 32
#: the largest state one scope may hold (its live natural ids, contents and budget slots, ~150
#: bytes each for ASCII ids, ~1.9 KB at worst: thousands of live claims). An action that would
#: grow it past this is dead-lettered, naming the scope, until claims expire: its state always
#: fits the changelog.
MAX_SCOPE_STATE_BYTES = 768 * 1024
#: the largest record runonce writes to actions.approved / .dropped, its internal topics and its
#: changelogs (their max.message.bytes, set by ``runonce topics create``)
MAX_OUTPUT_BYTES = 1024 * 1024
