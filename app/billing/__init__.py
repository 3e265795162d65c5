"""Credits: a monthly allowance per person, checked before a run is enqueued, and one
usage event metered after each run (idempotent by key)."""
