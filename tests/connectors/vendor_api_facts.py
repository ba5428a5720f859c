"""The facts of each vendor's published API description that the connector tests check
recorded requests (and the sandboxes' answers) against: paths, methods, required fields,
patterns and enum values. Only these facts are kept, each with where it came from; no file
is copied.

Slack: ``slackapi/slack-api-specs``, ``web-api/slack_web_openapi_v2_without_examples.json``
(commit 0e43fd0f), path ``/chat.postMessage`` under ``basePath: /api``. Google Calendar and
Kubernetes: below, each where its facts begin."""

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


# Google Calendar API v3: ``googleapis/google-api-go-client``, ``calendar/v3/calendar-api.json``
# (the discovery document, commit 8d21a5fa): ``resources.events.methods.insert`` and ``.get``,
# ``schemas.Event`` and ``schemas.EventDateTime``; ``rootUrl`` + ``servicePath`` give the prefix.
GOOGLE_CALENDAR_PREFIX = "/calendar/v3/"

GOOGLE_EVENTS_INSERT = {
    "httpMethod": "POST",
    "path": "calendars/{calendarId}/events",
    #: its parameters: ``calendarId`` in the path (required), the rest in the query
    "query": frozenset({"conferenceDataVersion", "maxAttendees", "sendNotifications", "sendUpdates",
                        "supportsAttachments"}),
    "sendUpdates": ("all", "externalOnly", "none"),
    #: Event properties annotated ``required: calendar.events.insert``
    "required": frozenset({"start", "end"}),
}

GOOGLE_EVENTS_GET = {
    "httpMethod": "GET",
    "path": "calendars/{calendarId}/events/{eventId}",
    "query": frozenset({"alwaysIncludeEmail", "maxAttendees", "timeZone"}),
}

#: ``schemas.Event.properties`` (the request body of events.insert)
GOOGLE_EVENT_PROPERTIES = frozenset({
    "anyoneCanAddSelf", "attachments", "attendees", "attendeesOmitted", "colorId",
    "conferenceData", "created", "creator", "description", "end", "endTimeUnspecified", "etag", "eventType",
    "extendedProperties", "focusTimeProperties", "gadget", "guestsCanInviteOthers", "guestsCanModify",
    "guestsCanSeeOtherGuests", "hangoutLink", "htmlLink", "iCalUID", "id", "kind", "location", "locked",
    "organizer", "originalStartTime", "outOfOfficeProperties", "privateCopy", "recurrence", "recurringEventId",
    "reminders", "sequence", "source", "start", "status", "summary", "transparency", "updated", "visibility",
    "workingLocationProperties"})
#: ``schemas.EventDateTime.properties``; ``dateTime`` is RFC 3339 and "a time zone offset is
#: required unless a time zone is explicitly specified in timeZone"
GOOGLE_EVENT_DATETIME = frozenset({"date", "dateTime", "timeZone"})
#: ``Event.id``: "characters allowed in the ID are those used in base32hex encoding, i.e.
#: lowercase letters a-v and digits 0-9 ... the length of the ID must be between 5 and 1024"
GOOGLE_EVENT_ID_PATTERN = r"^[a-v0-9]{5,1024}$"
#: ``EventAttendee.email``: "Required when adding an attendee"
GOOGLE_ATTENDEE_REQUIRED = frozenset({"email"})
#: ``insert.scopes``: the OAuth scopes that may insert an event
GOOGLE_SCOPES_FOR_INSERT = frozenset({"https://www.googleapis.com/auth/calendar",
                                      "https://www.googleapis.com/auth/calendar.events"})


# Kubernetes: ``kubernetes/kubernetes``, ``api/openapi-spec/v3/apis__apps__v1_openapi.json``
# (commit 0032f46b): ``paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]`` and
# ``components.schemas["io.k8s.api.apps.v1.Deployment"]``, ``[...DeploymentSpec]``.
KUBERNETES_DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"

KUBERNETES_DEPLOYMENT = {
    #: the path's own parameters (``name``, ``namespace`` in the path) apply to every method
    "path_query": frozenset({"pretty"}),
    #: ``get`` (readAppsV1NamespacedDeployment) declares no parameters of its own
    "get_query": frozenset(),
    #: ``patch`` (patchAppsV1NamespacedDeployment): its query parameters and the media types
    #: of its requestBody (required)
    "patch_query": frozenset({"dryRun", "fieldManager", "fieldValidation", "force"}),
    "patch_media_types": frozenset({"application/apply-patch+cbor", "application/apply-patch+yaml",
                                    "application/json-patch+json", "application/merge-patch+json",
                                    "application/strategic-merge-patch+json"}),
}
#: ``io.k8s.api.apps.v1.Deployment.properties`` and ``DeploymentSpec.properties``; ``template``
#: is an ``io.k8s.api.core.v1.PodTemplateSpec`` (``metadata``, ``spec``)
KUBERNETES_DEPLOYMENT_PROPERTIES = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
KUBERNETES_DEPLOYMENT_SPEC_PROPERTIES = frozenset({"minReadySeconds", "paused", "progressDeadlineSeconds", "replicas",
                                                   "revisionHistoryLimit", "selector", "strategy", "template"})
KUBERNETES_POD_TEMPLATE_PROPERTIES = frozenset({"metadata", "spec"})
