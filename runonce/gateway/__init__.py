"""``runonce mcp``: an MCP gateway, so an agent gets runonce without code changes.

The model calls a tool through the Model Context Protocol; the gateway publishes the call as
an action on ``actions.requested``, waits for its outcome, and answers the model with the
vendor's result, or, for a repeat, the original call's result and why it was not performed
again. ``tools.py`` says which tools are served and with what schema, ``answers.py`` what the
model is told, ``server.py`` serves them over stdio or streamable HTTP."""
