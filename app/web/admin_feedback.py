"""The feedback people gave answers, on the admin's Run logs page: counts, and the newest
with filters (thumbs up or down, with a comment), each linked to the run that wrote the
answer (app/chat/feedback.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from werkzeug.datastructures import MultiDict

from app.accounts.models import User
from app.chat.feedback import (
    DOWN,
    UP,
    AnswerFeedback,
    FeedbackCounts,
    FeedbackFilter,
    feedback_counts,
    recent_feedback,
)
from app.chat.models import Conversation
from app.web.identity import db_session

RATING_CHOICES = {"": None, "up": UP, "down": DOWN}
SHOWN = 50


@dataclass
class FeedbackListing:
    counts: FeedbackCounts
    items: list[dict]
    rating: str  # "", "up" or "down": as the filter form shows it
    commented: bool
    problem: str | None = None

    @property
    def filtered(self) -> bool:
        return bool(self.rating or self.commented)


def feedback_listing(args: MultiDict) -> FeedbackListing:
    """What `?rating=up|down&commented=1` asks for; an unknown rating is said, not guessed."""
    rating = args.get("rating", "")
    commented = args.get("commented", "") in ("1", "on", "true")
    problem = None
    if rating not in RATING_CHOICES:
        problem, rating = "Filter by a thumbs up or a thumbs down.", ""
    wanted = FeedbackFilter(RATING_CHOICES[rating], commented)
    session = db_session()
    items = recent_feedback(session, wanted, SHOWN)
    return FeedbackListing(feedback_counts(session), _with_chats(items), rating, commented, problem)


def _with_chats(items: list[AnswerFeedback]) -> list[dict]:
    """Each item with its chat's title and the person who gave it (one read)."""
    if not items:
        return []
    chats = {
        chat_id: (title, email)
        for chat_id, title, email in db_session().execute(
            select(Conversation.id, Conversation.title, User.email)
            .join(User, User.id == Conversation.user_id)
            .where(Conversation.id.in_({item.conversation_id for item in items}))
        )
    }
    return [
        {
            "item": item,
            "title": chats[item.conversation_id][0],
            "by": chats[item.conversation_id][1],
        }
        for item in items
        if item.conversation_id in chats
    ]
