"""Fan-out of run events to sockets: in-process, or over Redis when runs and sockets may
live in different processes."""

from __future__ import annotations

from app.config import Settings
from app.stream.hub import Hub, LocalHub


def make_hub(settings: Settings) -> Hub:
    """Redis pub/sub when REDIS_URL is set, else the in-process hub."""
    if not settings.redis_url:
        return LocalHub()
    from app.stream.redis_hub import RedisHub, live_ttl_seconds

    return RedisHub(
        settings.redis_url,
        prefix=settings.redis_prefix,
        live_ttl=live_ttl_seconds(settings.stale_seconds),
    )
