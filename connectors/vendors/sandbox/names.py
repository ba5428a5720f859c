"""The vendors the local sandbox plays, by the names its connectors file gives them (kept apart
from local.py, so a reader of the names needs no TLS or SMTP packages)."""

SANDBOX_VENDORS = ("payments", "smtp", "webhook", "kubernetes", "slack", "jira", "calendar", "salesforce")
