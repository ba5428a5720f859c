"""The gateway: agents in any language get runonce without our SDK.

A call comes in over MCP (``runonce mcp`` on stdio, or ``/mcp`` over HTTP) or the HTTP API
(``POST /v1/actions/{tool}`` with an ``Idempotency-Key``); it is published as an action on
``actions.requested``, and the answer is its outcome (a repeat gets the original's result).

Where things are: ``calls.py`` takes a call (who may make it, submit, wait); ``auth.py``
the bearer tokens; ``mcp_answers.py`` an answer (``runonce.tools``: which tools are served,
what a model is told) as MCP's result, ``http_api.py`` what an HTTP client is; ``openapi.py`` the API's
document; ``server.py`` the MCP server; ``app.py`` the HTTP app that serves both."""
