"""Stripe, as Stripe defines it: ``POST /v1/charges``, form-encoded, a secret key as the
Bearer token, the vendor key as ``Idempotency-Key`` and a pinned ``Stripe-Version``.

Why Charges and not PaymentIntents: an agent's ``charge_payment`` is one charge of a card or a
customer it already holds, with no person present. A Charge is that in one request, and it
either succeeded or was declined (a ``card_error``). A PaymentIntent adds states that need a
person (``requires_action`` for 3-D Secure), which an agent's action cannot answer; with
``off_session`` Stripe declines those as ``authentication_required`` anyway.

Why not Stripe's Python library: runonce's safety rule needs to know whether a request left
the machine (refused connection: not performed; lost after sending: unknown) and to see
every attempt, so its throttle and its attempts count are the truth. stripe-python folds
both failures into ``APIConnectionError`` and retries on its own (``max_network_retries``),
so one attempt of ours could be several at Stripe. Its request is one form POST; the
transport (connectors/toolkit/transport.py) is the one I/O seam of every HTTP connector.

Stripe's errors, read before the generic HTTP table (``_raise_for_stripe``):

    402 card_error                  failed, not performed (a decline is final)
    429 / rate_limit                the vendor's rate limit (every call to Stripe waits)
    400 idempotency_error           failed, loudly: the key was used with other parameters, so
                                    this action is not the one Stripe saw under it
    401, 403                        failed, not performed: the key is refused (probe it:
                                    ``runonce connectors check --probe``)
    409                             not performed: the same key is still in flight; retried
    5xx, timeout, lost connection   unknown: retried with the same key, which Stripe replays
                                    (a saved 500 included: then the action ends in_doubt)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlencode

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import PermanentVendorError, RateLimited
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status, retry_after_seconds

log = logging.getLogger("runonce.connectors.vendors.stripe")

#: the API version every request names, so Stripe's answers keep the shape this code reads
STRIPE_VERSION = "2024-06-20"
TOOLS = frozenset({"charge_payment"})


def charge_form(call: ActionCall) -> dict[str, str]:
    """The action's params as a Charge: ``amount_cents`` (or ``amount``) in the currency's
    smallest unit, ``currency`` (usd), ``card`` (a token or source) or ``customer``, and
    ``description``; the action id and vendor key go in ``metadata``, so a charge found in
    Stripe's dashboard leads back to the action."""
    params = call.params
    amount = params.get("amount_cents", params.get("amount"))
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise PermanentVendorError(f"{call.tool}: amount_cents must be a positive integer, got {amount!r}")
    form = {"amount": str(amount), "currency": str(params.get("currency", "usd")).lower(),
            "metadata[runonce_action_id]": call.action_id, "metadata[runonce_vendor_key]": call.vendor_key[:500]}
    source, customer = params.get("card", params.get("source")), params.get("customer")
    if not source and not customer:
        raise PermanentVendorError(f"{call.tool}: params need card (a token or source id) or customer")
    if source:
        form["source"] = str(source)
    if customer:
        form["customer"] = str(customer)
    if params.get("description"):
        form["description"] = str(params["description"])
    return form


@dataclass
class StripeConnector:
    name: str
    http: VendorHttp
    api_key: Secret
    tools: frozenset[str] = TOOLS
    capability = Capability.VENDOR_KEY

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key.reveal()}", "Stripe-Version": STRIPE_VERSION}

    def perform(self, call: ActionCall) -> VendorResponse:
        result = self.http.request("POST", "/v1/charges", urlencode(charge_form(call)).encode(),
                                   headers={**self._headers(), "Idempotency-Key": call.vendor_key,
                                            "Content-Type": "application/x-www-form-urlencoded"})
        _raise_for_stripe("POST", self.http.url("/v1/charges"), result, call)
        body: Mapping[str, Any] = result.body if isinstance(result.body, dict) else {}
        replayed = result.headers.get("idempotent-replayed") == "true"
        return VendorResponse(str(body.get("id")), "replayed" if replayed else str(body.get("status", "")))

    def probe(self) -> str:
        """Stripe's harmless authenticated call: the account's balance."""
        result = self.http.request("GET", "/v1/balance", headers=self._headers())
        _raise_for_stripe("GET", self.http.url("/v1/balance"), result, None)
        return f"GET /v1/balance answered {result.status} (key {self.api_key.source}, Stripe-Version {STRIPE_VERSION})"


def _raise_for_stripe(method: str, url: str, result: HttpResult, call: ActionCall | None) -> None:
    if result.status < 400:
        return
    error = result.body.get("error") if isinstance(result.body, dict) else None
    kind = str(error.get("type", "")) if isinstance(error, dict) else ""
    code = str(error.get("code", "")) if isinstance(error, dict) else ""
    message = str(error.get("message", "")) if isinstance(error, dict) else str(result.body)
    said = f"{method} {url}: HTTP {result.status} {kind}{f' ({code})' if code else ''}: {message}"
    if result.status == 429 or code == "rate_limit":
        raise RateLimited(said, retry_after_seconds(result.headers.get("retry-after")))
    if result.status == 409:  # the same key in flight: nothing saved under it yet
        raise_for_status(method, url, result)
    if kind == "card_error":
        raise PermanentVendorError(said)
    if kind == "idempotency_error":
        log.error("Stripe refused idempotency key %r of action %s: %s", call.vendor_key if call else "",
                  call.action_id if call else "", message)
        raise PermanentVendorError(f"{said} (the key was used before with other parameters)")
    if result.status in (401, 403):
        raise PermanentVendorError(f"{said} (Stripe refused the API key)")
    raise_for_status(method, url, result)


FIELDS = Spec("stripe", (
    Field("api_key", FieldType.SECRET, "the secret key (`sk_live_...`) or a restricted key with Charges: write"),
    Field("base_url", FieldType.URL, "Stripe's API, or stripe-mock's", "https://api.stripe.com"),
))


def from_config(fields: VendorFields) -> StripeConnector:
    http = fields.http(fields.url("base_url"))
    return StripeConnector(fields.name, http, fields.secret("api_key"), fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
