"""runonce tools in an agent framework's own types: ``langchain`` (langchain-core tools) and
``openai_agents`` (OpenAI Agents SDK function tools). Each tool is built from the policies
(``runonce.tools.specs``: its argument schema and description) and calls through the SDK,
so the framework's own retries are harmless: a retry is a repeat, answered with the
original call's result. ``calling.py`` holds what both share."""
