"""Measured from outside: OpenTelemetry traces (GenAI conventions) and Prometheus metrics.

The lowest layer: every package may report here, and this package imports nothing of
the app's (what it needs, such as the settings, is handed to it)."""
