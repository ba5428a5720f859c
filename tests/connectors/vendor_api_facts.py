"""The facts of each vendor's published API description that the connector tests check
recorded requests (and the sandboxes' answers) against: paths, methods, required fields,
patterns and enum values. Only these facts are kept, each with where it came from; no file
is copied.

Slack: ``slackapi/slack-api-specs``, ``web-api/slack_web_openapi_v2_without_examples.json``
(commit 0e43fd0f), path ``/chat.postMessage`` under ``basePath: /api``."""

from __future__ import annotations

#: Slack's Web API (Swagger 2.0): the base path every method is under
SLACK_BASE_PATH = "/api"

#: ``/chat.postMessage``: ``post`` only; consumes form data or JSON
SLACK_POST_MESSAGE = {
    "path": "/chat.postMessage",
    "method": "POST",
    "consumes": ("application/x-www-form-urlencoded", "application/json"),
    #: formData parameters, as the description lists them; ``channel`` is the required one
    "parameters": frozenset({"attachments", "unfurl_links", "text", "unfurl_media", "parse", "as_user", "mrkdwn",
                             "channel", "blocks", "icon_emoji", "link_names", "reply_broadcast", "thread_ts",
                             "username", "icon_url"}),
    "required": frozenset({"channel"}),
    #: the token parameter is ``in: header`` and required (sent as ``Authorization: Bearer``)
    "token_in": "header",
    #: the 200 response's required fields, and the patterns of two of them
    "success_required": frozenset({"ok", "channel", "ts", "message"}),
    "channel_pattern": r"^[CGD][A-Z0-9]{8,}$",  # definitions/defs_channel
    "ts_pattern": r"^\d{10}\.\d{6}$",  # definitions/defs_ts
    #: the error response: required ``ok`` (false) and ``error``, one of these
    "error_required": frozenset({"ok", "error"}),
    "errors": ("channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text",
               "too_many_attachments", "rate_limited", "not_authed", "invalid_auth", "account_inactive",
               "invalid_arg_name", "invalid_array_arg", "invalid_charset", "invalid_form_data",
               "invalid_post_type", "missing_post_type"),
}

#: errors Slack's method documentation (api.slack.com/methods/chat.postMessage) lists beyond
#: the description's enum, with its words for the two that may hide a post: internal_error and
#: fatal_error ("It's possible some aspect of the operation succeeded before the error was raised")
SLACK_DOCUMENTED_ERRORS = ("ratelimited", "token_revoked", "no_permission", "missing_scope", "internal_error",
                           "fatal_error", "service_unavailable", "request_timeout")
