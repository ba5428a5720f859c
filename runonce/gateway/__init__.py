"""The gateway: agents in any language get runonce without our SDK.

A call comes in over MCP (``runonce mcp`` on stdio, or ``/mcp`` over HTTP) or the HTTP API
(``POST /v1/actions/{tool}`` with an ``Idempotency-Key``); it is published as an action on
``actions.requested``, and the answer is its outcome (a repeat gets the original's result).

Where things are: ``calls.py`` takes a call (who may make it, submit, wait); ``auth.py``
the bearer tokens; ``tools.py`` which tools are served and with what schema; ``answers.py``
what a model is told, ``http_api.py`` what an HTTP client is; ``openapi.py`` the API's
document; ``server.py`` the MCP server; ``app.py`` the HTTP app that serves both."""
