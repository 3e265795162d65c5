"""Ownership in one place: what is not yours answers 404, like what does not exist."""

from __future__ import annotations

from typing import TypeVar

from flask import abort, request
from flask_login import current_user

from app.web.identity import db_session

T = TypeVar("T")


def owned_or_404(model: type[T], object_id: int) -> T:
    obj = db_session().get(model, object_id)
    if obj is None or getattr(obj, "user_id", None) != current_user.id:
        abort(404)
    return obj


def is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"
