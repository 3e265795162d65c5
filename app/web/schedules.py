"""Scheduled messages (app/chat/schedules.py): the owner's JSON API and the chat header's
Schedule panel (htmx; every answer of its posts is the panel).

A schedule belongs to the chat's owner while they are a member of its project, as the chat
does (404 otherwise). Scheduling is sending a message later: it needs what sending needs
(the project's `read`, which every role has; a viewer's runs change nothing in the
workspace, as when they type: app/tools/invoke.py)."""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from pydantic import BaseModel, Field

from app.chat.cron import (
    CRON_MAX_CHARS,
    PHRASE_MAX_CHARS,
    ZONE_MAX_CHARS,
    ScheduleRefused,
    describe,
)
from app.chat.models import Conversation
from app.chat.schedule_models import ChatSchedule
from app.chat.schedules import (
    MAX_SCHEDULES_PER_CHAT,
    ScheduleSpec,
    add_schedule,
    local_time,
    schedule_dict,
    schedule_in,
    schedules_of,
    set_paused,
)
from app.db import utcnow
from app.error_codes import ErrorCode
from app.web.access import is_htmx, owned_or_404
from app.web.api import body_of
from app.web.chat_actions import refuse_if_unconfirmed
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.shapes import NOT_BLANK, Body, MessageText

bp = Blueprint("schedules", __name__)

_REFUSALS = (ErrorCode.INVALID_SCHEDULE, ErrorCode.UNKNOWN_TIME_ZONE)


class ScheduleCreate(Body):
    cron: str | None = Field(
        None,
        max_length=CRON_MAX_CHARS,
        description="Five cron fields (minute hour day-of-month month day-of-week), in "
        "`timezone`; or give `when`",
    )
    when: str | None = Field(
        None,
        max_length=PHRASE_MAX_CHARS,
        description='A phrase: "every weekday at 9:00", "every day at 18:30", "every monday '
        'at 8:00" (read into `cron`)',
    )
    message: MessageText = Field(description="What is sent into the chat at each tick")
    timezone: str = Field(
        "UTC", min_length=1, max_length=ZONE_MAX_CHARS, pattern=NOT_BLANK, description="IANA name"
    )


class SchedulePatch(Body):
    paused: bool = Field(description="Pause (true), or resume from now (false)")


class ScheduleOut(BaseModel):
    id: int
    conversation_id: int
    cron: str
    description: str = Field(description="The cron expression in words")
    timezone: str
    message: str
    paused: bool
    next_run_at: str | None = Field(description="UTC; none while paused")
    next_run_local: str | None = Field(description="The same instant in `timezone`")
    last_run_at: str | None
    last_error: str | None = Field(description="Why the last tick was not sent, if it was not")
    created_at: str


class ScheduleList(BaseModel):
    schedules: list[ScheduleOut]


def _refused(refusal: ScheduleRefused) -> ApiError:
    return ApiError(refusal.status, refusal.message, refusal.code, field=refusal.field)


def _create(conversation: Conversation, spec: ScheduleSpec):
    refuse_if_unconfirmed()
    session = db_session()
    try:
        schedule = add_schedule(session, conversation.id, current_user.id, spec, utcnow())
    except ScheduleRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    session.commit()
    return schedule


def _one(conversation: Conversation, schedule_id: int):
    try:
        return schedule_in(db_session(), conversation, schedule_id)
    except ScheduleRefused as refusal:
        raise _refused(refusal) from None


# -- the JSON API ---------------------------------------------------------------------------


@bp.post("/api/chats/<int:conversation_id>/schedules")
@documented(
    "POST",
    "Schedule a message in the chat",
    response=ScheduleOut,
    status=201,
    body=ScheduleCreate,
    errors=(*_REFUSALS, ErrorCode.TOO_MANY_SCHEDULES, ErrorCode.EMAIL_UNCONFIRMED),
    description="`cron` (five fields, minute resolution) or `when` (a phrase), in "
    f"`timezone` (an IANA name; default UTC). At most {MAX_SCHEDULES_PER_CHAT} per chat. "
    "Each tick sends `message` as the person's, starting a run as typing it would; a tick "
    "due while a reply is being written waits for it; one missed while the server was down "
    "is sent once, late.",
)
@login_required
def create(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    body = body_of(ScheduleCreate)
    spec = ScheduleSpec(body.message, body.timezone.strip(), body.cron, body.when)
    return jsonify(schedule_dict(_create(conversation, spec))), 201


@bp.get("/api/chats/<int:conversation_id>/schedules")
@documented("GET", "The chat's scheduled messages", response=ScheduleList)
@login_required
def listing(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    items = [schedule_dict(s) for s in schedules_of(db_session(), conversation)]
    return jsonify({"schedules": items})


@bp.patch("/api/chats/<int:conversation_id>/schedules/<int:schedule_id>")
@documented(
    "PATCH", "Pause or resume a scheduled message", response=ScheduleOut, body=SchedulePatch
)
@login_required
def change(conversation_id: int, schedule_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    body = body_of(SchedulePatch)
    schedule = _one(conversation, schedule_id)
    set_paused(schedule, body.paused, utcnow())
    db_session().commit()
    return jsonify(schedule_dict(schedule))


@bp.delete("/api/chats/<int:conversation_id>/schedules/<int:schedule_id>")
@documented("DELETE", "Delete a scheduled message", status=204)
@login_required
def delete(conversation_id: int, schedule_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    session = db_session()
    session.delete(_one(conversation, schedule_id))
    session.commit()
    return "", 204


# -- the chat page's Schedule panel ---------------------------------------------------------


@bp.record_once
def _template_names(state) -> None:
    state.app.jinja_env.globals.update(max_schedules_per_chat=MAX_SCHEDULES_PER_CHAT)
    state.app.jinja_env.filters.update(cron_words=describe)


def _local_text(schedule: ChatSchedule) -> str:
    """ "Mon 7 Dec 2026, 09:00 CET": the next run as the schedule's zone shows it."""
    local = local_time(schedule.next_run_at, schedule.timezone)
    if local is None:
        return ""
    return f"{local:%a} {local.day} {local:%b %Y, %H:%M} {local.tzname() or ''}".rstrip()


@bp.app_template_global()
def chat_schedules(conversation_id: int) -> list[tuple[ChatSchedule, str]]:
    """The chat's schedules with their next run in their zone, for the panel."""
    conversation = db_session().get(Conversation, conversation_id)
    if conversation is None:
        return []
    return [
        (schedule, _local_text(schedule)) for schedule in schedules_of(db_session(), conversation)
    ]


def _panel(
    conversation: Conversation,
    status: int = 200,
    error: str | None = None,
    form=None,
    focus: str = "schedule-when",
):
    """`focus`: the id the swapped panel gives the focus (its button was swapped away)."""
    html = render_template(
        "chat/_schedules.html",
        conversation=conversation,
        schedule_error=error,
        schedule_form=form or {},
        schedule_focus=focus,
    )
    return make_response(html, status)


def _after_post(conversation: Conversation, status: int = 200, focus: str = "schedule-when"):
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    return _panel(conversation, status, focus=focus)


@bp.post("/chats/<int:conversation_id>/schedules")
@login_required
def create_from_page(conversation_id: int):
    """The panel's add form: `when` (a phrase or a cron expression), `message`,
    `timezone`. A refusal answers the panel with the form as typed and what is wrong."""
    conversation = owned_or_404(Conversation, conversation_id)
    form = {name: request.form.get(name, "").strip() for name in ("when", "message", "timezone")}
    when = form["when"]
    as_phrase = when.lower().startswith("every")
    spec = ScheduleSpec(
        message=form["message"][: current_app.config["LOOPDESK"].max_message_chars],
        timezone=form["timezone"] or "UTC",
        cron=None if as_phrase else when[:CRON_MAX_CHARS],
        when=when[:PHRASE_MAX_CHARS] if as_phrase else None,
    )
    if not spec.message:
        return _panel(conversation, 400, "Write the message to send.", form)
    try:
        _create(conversation, spec)
    except ApiError as refused:
        if refused.status != 400:
            raise
        return _panel(conversation, 400, refused.message, form)
    return _after_post(conversation, 201)


@bp.post("/chats/<int:conversation_id>/schedules/<int:schedule_id>/pause")
@login_required
def pause_from_page(conversation_id: int, schedule_id: int):
    """Pause (form `paused=1`) or resume (`paused=0`)."""
    conversation = owned_or_404(Conversation, conversation_id)
    schedule = _one(conversation, schedule_id)
    set_paused(schedule, request.form.get("paused") == "1", utcnow())
    db_session().commit()
    return _after_post(conversation, focus=f"schedule-{schedule.id}-pause")


@bp.post("/chats/<int:conversation_id>/schedules/<int:schedule_id>/delete")
@login_required
def delete_from_page(conversation_id: int, schedule_id: int):
    """The panel's Delete: the schedule sends nothing more."""
    conversation = owned_or_404(Conversation, conversation_id)
    session = db_session()
    session.delete(_one(conversation, schedule_id))
    session.commit()
    return _after_post(conversation)
