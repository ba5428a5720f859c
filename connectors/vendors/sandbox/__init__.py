"""Local vendors that speak the real protocols (HTTP, SMTP), record every side effect in a
ledger, and inject faults: slow answers, successes whose response is dropped, 500s."""
