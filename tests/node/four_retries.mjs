// The 4-charge incident from an agent written in JavaScript: a slow card processor, and a
// client that retries the charge (same Idempotency-Key) instead of waiting. Plain fetch, no SDK.
// Usage: node four_retries.mjs URL TOKEN KEY  -> prints one JSON line per answer.
const [url, token, key] = process.argv.slice(2);
const charge = () => fetch(`${url}/v1/actions/charge_payment?wait=30`, {
  method: "POST",
  headers: {"Authorization": `Bearer ${token}`, "Idempotency-Key": key, "Content-Type": "application/json"},
  body: JSON.stringify({card: "tok_visa", amount_cents: 41900}),
});
const first = charge();                                  // the first attempt, still waiting ...
await new Promise((resolve) => setTimeout(resolve, 300));
const retries = [charge(), charge(), charge()];          // ... and three retries on top of it
for (const answer of await Promise.all([first, ...retries])) {
  console.log(JSON.stringify({
    status: answer.status,
    replayed: answer.headers.get("Idempotent-Replayed"),
    action: answer.headers.get("Runonce-Action-Id"),
    body: await answer.text(),
  }));
}
