"""The sandbox's Jira Cloud, as the connector tests reach it: REST v3 with its account."""

from __future__ import annotations

from typing import Any

from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.jira import JiraCloudConnector
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer

#: the paths the sandbox records Jira's requests under
ISSUE = "/rest/api/3/issue"
SEARCH = "/rest/api/3/search/jql"


def jira_connector(vendors: VendorServer, timeout_s: float = 30.0, **fields: Any) -> JiraCloudConnector:
    email, token = vendors.state.jira_account
    return JiraCloudConnector("jira", VendorHttp(vendors.url, timeout_s=timeout_s), email, Secret("test", token),
                              **fields)
