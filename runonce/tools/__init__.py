"""A tool as an agent sees it, whatever carries the call: which tools are served and with what
argument schema (``specs.py``), and what a model is told of a call's outcome (``answers.py``).

Framework-neutral on purpose: the gateway (MCP, HTTP) and every framework adapter
(``runonce.integrations``) build on it, and it imports none of them, so ``runonce[langchain]``
alone needs no MCP SDK."""
