"""Observability: Prometheus metrics, structured logs, session reports, test-only fault injection."""
