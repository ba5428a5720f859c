"""Watching runonce: a real Prometheus over every component's metrics, runonce's alert rules
(alerts.yml, unit-tested by promtool with alerts_test.yml) and a Grafana dashboard
(dashboard.json). ``runonce up --observe`` starts it; ``runonce observe fetch`` installs it."""
