"""Feedback on an answer (app/chat/feedback.py) as JSON and from the row's thumbs.

`POST /api/chats/<id>/messages/<sequence>/feedback {"rating": 1 | -1, "comment"}` gives or
replaces the person's rating, `DELETE` takes it back; the row's buttons post to the page
route, which answers the row's feedback block (chat/_feedback.html) for htmx to swap."""

from __future__ import annotations

from typing import Annotated

from flask import jsonify, render_template, request
from flask_login import current_user, login_required
from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from app.chat.feedback import (
    DOWN,
    MAX_COMMENT_CHARS,
    RATINGS,
    FeedbackRefused,
    answer_row,
    clear_feedback,
    give_feedback,
)
from app.chat.models import Conversation
from app.error_codes import ErrorCode
from app.web import api, chat
from app.web.access import owned_or_404
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.shapes import Body


def _rating(value: int) -> int:
    if value not in RATINGS:
        raise PydanticCustomError("rating", "must be 1 (a good answer) or -1 (a bad one)")
    return value


# An int, strictly (True is refused), that is 1 or -1 (a Literal would take True for 1).
Rating = Annotated[
    int,
    Field(json_schema_extra={"enum": list(RATINGS)}, description="1: a good answer; -1: a bad one"),
    AfterValidator(_rating),
]
Comment = Annotated[
    str, Field(max_length=MAX_COMMENT_CHARS, description="What was good or wrong (optional)")
]


class FeedbackBody(Body):
    rating: Rating
    comment: Comment | None = None


class FeedbackOut(BaseModel):
    sequence: int
    rating: int
    comment: str | None
    runId: int | None  # noqa: N815 (the wire's name)
    updated_at: str


class FeedbackCleared(BaseModel):
    cleared: bool = Field(description="False when there was no feedback to take back")


REFUSALS = (ErrorCode.NOT_AN_ANSWER,)


def _refused(refusal: FeedbackRefused) -> ApiError:
    if refusal.missing:
        return ApiError(404, refusal.message, ErrorCode.NOT_FOUND)
    return ApiError(422, refusal.message, ErrorCode.NOT_AN_ANSWER)


def _write(conversation_id: int, sequence: int, rating: int, comment: str | None):
    """Give (`rating` 1 or -1) or take back (0) the person's feedback, in one transaction;
    the feedback now, or None."""
    session = db_session()
    try:
        if rating == 0:
            clear_feedback(session, conversation_id, sequence, current_user.id)
            given = None
        else:
            given = give_feedback(
                session, conversation_id, sequence, current_user.id, rating, comment
            )
        session.commit()
    except FeedbackRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    return given


@api.bp.post("/chats/<int:conversation_id>/messages/<int:sequence>/feedback")
@documented(
    "POST",
    "Rate an answer (thumbs up or down, with an optional comment)",
    response=FeedbackOut,
    body=FeedbackBody,
    errors=REFUSALS,
)
@login_required
def give(conversation_id: int, sequence: int):
    request.get_data(cache=True)  # before the first write, never while holding it
    owned_or_404(Conversation, conversation_id)
    body = body_of(FeedbackBody)
    given = _write(conversation_id, sequence, body.rating, body.comment)
    assert given is not None
    return jsonify(given.as_dict())


@api.bp.delete("/chats/<int:conversation_id>/messages/<int:sequence>/feedback")
@documented(
    "DELETE", "Take back your rating of an answer", response=FeedbackCleared, errors=REFUSALS
)
@login_required
def take_back(conversation_id: int, sequence: int):
    owned_or_404(Conversation, conversation_id)
    session = db_session()
    try:
        cleared = clear_feedback(session, conversation_id, sequence, current_user.id)
        session.commit()
    except FeedbackRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    return jsonify({"cleared": cleared})


@chat.bp.post("/chats/<int:conversation_id>/messages/<int:sequence>/feedback")
@login_required
def rate_from_page(conversation_id: int, sequence: int):
    """A row's thumbs (or its comment form): `rating` 1, -1, or 0 to take it back."""
    owned_or_404(Conversation, conversation_id)
    rating = _form_rating()
    comment = request.form.get("comment")
    if comment is not None and len(comment) > MAX_COMMENT_CHARS:
        raise ApiError(
            400,
            f"A comment can be at most {MAX_COMMENT_CHARS:,} characters.",
            ErrorCode.INVALID_FIELD,
            field="comment",
        )
    given = _write(conversation_id, sequence, rating, comment)
    row = answer_row(db_session(), conversation_id, sequence)
    return render_template(
        "chat/_feedback.html",
        conversation_id=conversation_id,
        row={"sequence": row.sequence, "feedback": given.as_dict() if given else None},
        # A thumbs down opens its comment form (focused); a comment sent closes it.
        ask_comment=given is not None and given.rating == DOWN and "comment" not in request.form,
    )


def _form_rating() -> int:
    value = request.form.get("rating", "")
    ratings = {str(rating): rating for rating in (*RATINGS, 0)}
    if value not in ratings:
        raise ApiError(400, "Rate the answer 1 (good) or -1 (bad), or 0 to take it back.")
    return ratings[value]
