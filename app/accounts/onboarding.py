"""First-run personalization, the account's side: the starters (suggested first requests
for the empty chat) a person has, or the defaults while better ones are written. The
fast model writes them in `app.agents.onboarding`; the web layer saves the answers."""

from __future__ import annotations

from datetime import timedelta

from app.accounts.models import User
from app.db import utcnow

# A generation still running after this long is taken for lost: the page stops polling
# and shows the default starters.
PENDING_FOR = timedelta(minutes=2)

DEFAULT_STARTERS: list[dict[str, str]] = [
    {
        "title": "Write ad copy for my main offer",
        "prompt": "Write three short ad variations for my main offer, each with a headline "
        "and a call to action.",
    },
    {
        "title": "Make a lead quiz",
        "prompt": "Make a five-question lead quiz for my audience that recommends the right "
        "offer at the end.",
    },
    {
        "title": "Draft a welcome email sequence",
        "prompt": "Draft a three-email welcome sequence for new subscribers.",
    },
    {
        "title": "Outline a landing page",
        "prompt": "Outline a landing page for my main offer: sections, headlines and the "
        "call to action.",
    },
]


def default_starters() -> list[dict[str, str]]:
    return [dict(starter) for starter in DEFAULT_STARTERS]


def normalize_website(raw: str) -> str:
    """A bare domain ("acme.com") gets https:// in front; anything else is kept as typed
    (the fetch refuses what it will not read)."""
    raw = (raw or "").strip()
    if raw and "://" not in raw:
        raw = "https://" + raw
    return raw


def starters_for(user: User) -> tuple[list[dict[str, str]], bool]:
    """(the starters to show, whether better ones are still being written)."""
    starters = [s for s in (user.starters or []) if isinstance(s, dict) and s.get("prompt")]
    if starters:
        return starters, False
    pending = (
        user.onboarded_at is not None
        and bool(user.role)
        and utcnow() - user.onboarded_at < PENDING_FOR
    )
    return default_starters(), pending


def starter_sources(user: User | None, text: str) -> list[dict]:
    """The untrusted sources of the person's starters that `text` carries (a starter
    written from their website, sent as is or inside a longer message); empty when none.
    Matched by text, so it holds however the starter arrives (a card, the composer, the
    API)."""
    sources: list[dict] = []
    for starter in (user.starters or []) if user is not None else []:
        if not isinstance(starter, dict) or not starter.get("untrusted_sources"):
            continue
        prompt = str(starter.get("prompt") or "").strip()
        if prompt and prompt in text:
            sources += [s for s in starter["untrusted_sources"] if s not in sources]
    return sources
