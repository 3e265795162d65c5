"""Answering questionnaire cards from the chat page.

One form for every card (templates/chat/_card.html). Field names:

- ``csrf_token``: the CSRF token.
- ``<step id>``: the step's answer. For choice steps each value is the option's value
  JSON-encoded (``"feed_image"``, ``42``), so it maps back to the option exactly; a multi
  step sends the field once per ticked box. A text step sends its text.
- ``<step id>__text``: the typed answer of a choice step that allows free text. When it is
  not blank it is the answer (it wins over a ticked choice).
- ``dismiss=1``: skip the card (``{"dismissed": true}``).
- ``approved=true|false``: the answer to a confirmation card.

The route turns the fields into the result the tool expects (docs/CONTRACT.md), checks each
step with the card's own rules, and resumes the run through ``start_turn``. An htmx
request gets the card's row back (the answered summary, or the card again with its errors
and status 400/409); a plain form post is redirected to the chat page, or gets the chat
page with the errors; a JSON client gets JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from flask import (
    Blueprint,
    current_app,
    g,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import login_required
from sqlalchemy import select
from werkzeug.datastructures import MultiDict

from app.chat.conversations import row_dict
from app.chat.models import Message
from app.chat.runs import awaiting_card
from app.chat.shapes import (
    card_of,
    card_summary,
    is_confirmation,
    meta_of,
    option_json,
    same_value,
)
from app.chat.turn import CardAnswer
from app.error_codes import ErrorCode
from app.kinds import CardKind, CardStatus, RowKind
from app.row_meta import Card
from app.tools.questionnaire import check_step
from app.web.access import is_htmx, owned_conversation_for_turn
from app.web.chat_actions import start_turn
from app.web.composer import composer_html
from app.web.errors import ApiError, error_response
from app.web.extensions import message_rate_limit
from app.web.identity import db_session, wants_json

bp = Blueprint("cards", __name__)

FREE_TEXT_SUFFIX = "__text"
DISMISS_FIELD = "dismiss"
APPROVED_FIELD = "approved"
NOT_AWAITING = (
    "That question is not waiting for an answer any more (it was answered, skipped or never asked)."
)


# --- matching posted fields to the card ------------------------------------------------


def _option_index(step: dict, raw: str) -> int | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    for index, opt in enumerate(step.get("options") or []):
        if same_value(opt.get("value"), value):
            return index
    return None


def _required(card: Card, step: dict) -> bool:
    # A card answered {resultKey: ...} always needs its one answer.
    return bool(step.get("required", True) or card.get("resultKey") is not None)


@dataclass
class ParsedAnswer:
    """What the form said, step by step; `result` is set when every step is answered."""

    result: dict | None = None
    errors: dict[str, str] = field(default_factory=dict)
    steps: dict[str, dict] = field(default_factory=dict)  # for re-rendering the form


def _parse_step(step: dict, form: MultiDict) -> tuple[Any, str | None, dict, bool]:
    """(value, error, state for re-rendering, whether the value is typed free text)."""
    step_id = step["id"]
    kind = step.get("input")
    title = step.get("title") or step_id
    state: dict[str, Any] = {"chosen": [], "text": "", "free": ""}
    if kind == "text":
        text = form.get(step_id, "")
        state["text"] = text
        return text.strip(), None, state, False
    raws = form.getlist(step_id)
    chosen: list[int] = []
    for raw in raws:
        index = _option_index(step, raw)
        if index is None:
            return None, f"That is not one of the choices for “{title}”.", state, False
        if index not in chosen:
            chosen.append(index)
    chosen.sort()
    state["chosen"] = chosen
    options = step.get("options") or []
    if kind == "multi":
        return [options[index]["value"] for index in chosen], None, state, False
    free = form.get(step_id + FREE_TEXT_SUFFIX, "") if step.get("allowFreeText") else ""
    state["free"] = free
    if free.strip():
        return free.strip(), None, state, True
    if len(chosen) > 1:
        return None, f"Choose only one answer for “{title}”.", state, False
    return (options[chosen[0]]["value"] if chosen else None), None, state, False


def parse_answer(card: Card, form: MultiDict) -> ParsedAnswer:
    """Turn the posted form into the card's result shape, or per-step errors."""
    parsed = ParsedAnswer()
    steps = card.get("steps") or []
    values: dict[str, Any] = {}
    typed: dict[str, bool] = {}
    for step in steps:
        value, error, state, is_free = _parse_step(step, form)
        parsed.steps[step["id"]] = state
        if error is None:
            error = check_step({**step, "required": _required(card, step)}, value)
        if error:
            parsed.errors[step["id"]] = error
        values[step["id"]] = value
        typed[step["id"]] = is_free
    if parsed.errors:
        return parsed
    if not steps:
        parsed.errors[""] = "This card has no question to answer."
        return parsed
    result_key = card.get("resultKey")
    if result_key is None:
        parsed.result = {"answers": values}
        return parsed
    only = steps[0]
    free_key = card.get("freeTextKey")
    if free_key and (only.get("input") == "text" or typed[only["id"]]):
        parsed.result = {free_key: values[only["id"]]}
    else:
        parsed.result = {result_key: values[only["id"]]}
    return parsed


def parse_confirmation(form: MultiDict[str, str]) -> dict[str, Any] | None:
    answer = form.get(APPROVED_FIELD)
    if answer not in ("true", "false"):
        return None
    return {"approved": answer == "true"}


# --- what the template shows -----------------------------------------------------------


@bp.app_template_filter("dom_id")
def _dom_id(text: Any) -> str:
    """Text made fit for an HTML id; _card.html builds its ids with it."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(text))


def _safe_thumbnail(url: Any) -> str | None:
    """Only same-site paths (the tools give /workspace/assets/<id>)."""
    if not isinstance(url, str) or not url.startswith("/") or url.startswith(("//", "/\\")):
        return None
    return url


def _form_state(tool_use_id: Any) -> dict:
    state = g.get("card_state")
    if state and state.get("toolUseId") == tool_use_id:
        return state
    return {}


def card_view(card: Card) -> dict:
    """Everything _card.html needs, worked out once: hints, checked options, the errors
    and values of a rejected post, and the answered summary (the partial owns its ids)."""
    tool_use_id = card.get("toolUseId", "")
    state = _form_state(tool_use_id)
    posted = state.get("steps") or {}
    errors = state.get("errors") or {}
    steps = [
        _step_view(card, step, number, posted, errors)
        for number, step in enumerate(card.get("steps") or [], start=1)
    ]
    answer = card.get("answer")
    if not isinstance(answer, dict):
        answer = {}
    arguments = card.get("arguments")
    return {
        "kind": card.get("kind", CardKind.QUESTIONNAIRE),
        "status": card.get("status", CardStatus.AWAITING),
        "title": card.get("title") or _default_title(card),
        "submit_label": card.get("submitLabel") or "Continue",
        "steps": steps,
        "multi_step": len(steps) > 1,
        "error": state.get("error") or errors.get(""),
        "summary": card_summary(card),
        "dismissed": card.get("status") == CardStatus.DISMISSED,
        "approved": answer.get("approved") if is_confirmation(card) else None,
        "reason": card.get("reason") or "",
        "arguments": (
            json.dumps(arguments, ensure_ascii=False, indent=2) if arguments is not None else ""
        ),
        "tool": card.get("tool", ""),
        # An MCP server's tool: whose it is, in plain words beside the arguments.
        "server": str(card.get("server") or ""),
        "server_tool": str(card.get("serverTool") or ""),
        # A held call's exact address and memory change, shown as they will run.
        "url": card.get("url") if isinstance(card.get("url"), dict) else None,
        "memory": [item for item in card.get("memory") or [] if isinstance(item, dict)],
    }


def _step_view(card: Card, step: dict, number: int, posted: dict, errors: dict) -> dict:
    """One step of the card: its options checked as posted (a rejected post) or as the
    step's default, its hint, and its error."""
    step_id = step.get("id", str(number))
    kind = step.get("input", "single")
    required = _required(card, step)
    mine = posted.get(step_id)
    default = step.get("default")
    max_length = int(step.get("maxLength") or 2000)
    if mine is not None:
        text = mine.get("text", "")
    else:
        text = default if kind == "text" and isinstance(default, str) else ""
    return {
        "id": step_id,
        "number": number,
        "title": step.get("title", ""),
        "input": kind,
        "required": required,
        "options": [
            _option_view(opt, index, mine, default)
            for index, opt in enumerate(step.get("options") or [])
        ],
        "free_text": bool(step.get("allowFreeText")) and kind == "single",
        "free_value": (mine or {}).get("free", ""),
        "text": text,
        "max_length": max_length,
        "placeholder": step.get("placeholder") or "",
        "hint": _step_hint(kind, required, max_length),
        "error": errors.get(step_id),
    }


def _option_view(opt: dict, index: int, mine: dict | None, default) -> dict:
    if mine is not None:
        checked = index in mine.get("chosen", [])
    elif isinstance(default, list):
        checked = any(same_value(opt.get("value"), item) for item in default)
    else:
        checked = default is not None and same_value(opt.get("value"), default)
    return {
        "label": str(opt.get("label", "")),
        "json": option_json(opt.get("value")),
        "description": opt.get("description") or "",
        "badge": opt.get("badge") or "",
        "thumbnail": _safe_thumbnail(opt.get("thumbnail")),
        "checked": checked,
    }


def _step_hint(kind: str, required: bool, max_length: int) -> str:
    if kind == "text":
        hint = f"Up to {max_length} characters."
        return hint if required else "Optional. " + hint
    if kind == "multi":
        return "Choose at least one." if required else "Choose any that apply (optional)."
    return "Choose one." if required else "Choose one (optional)."


def _default_title(card: Card) -> str:
    if is_confirmation(card):
        return "Allow this step?"
    return "A question for you"


@bp.app_template_global("card_view")
def _card_view_global(card: Card) -> dict:
    return card_view(card)


# --- the route -------------------------------------------------------------------------


def _card_row(conversation_id: int, tool_use_id: str) -> Message | None:
    rows = db_session().scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.kind == RowKind.CARD)
        .order_by(Message.sequence.desc())
    )
    for row in rows:
        card = card_of(row)
        if card is not None and card.get("toolUseId") == tool_use_id:
            return row
    return None


def _refused(
    conversation_id: int,
    tool_use_id: str,
    status: int,
    code: ErrorCode,
    message: str,
    parsed: ParsedAnswer | None = None,
):
    """The card again, with what went wrong: its row for htmx, JSON for scripts, the chat
    page for a plain form post."""
    if wants_json() and not is_htmx():
        return error_response(status, code, message)
    db_session().expire_all()
    row = _card_row(conversation_id, tool_use_id)
    if row is None:
        # No such card in this chat: nothing to show the message on.
        if not is_htmx():
            return error_response(status, code, message)
        response = make_response(message, status)
        response.headers["HX-Reswap"] = "none"
        return response
    errors = dict(parsed.errors) if parsed else {}
    g.card_state = {
        "toolUseId": tool_use_id,
        "errors": errors,
        "error": None if errors else message,
        "steps": parsed.steps if parsed else {},
    }
    if not is_htmx():
        page = current_app.view_functions["chat.show"](conversation_id=conversation_id)
        return make_response(page, status)
    html = render_template("chat/_row.html", row=row_dict(row), conversation_id=conversation_id)
    # The composer as the run is now: an answer that did not take changes nothing here,
    # and the page follows the server, not the click.
    return make_response(html + composer_html(conversation_id), status)


def _first_error(parsed: ParsedAnswer) -> str:
    return next(iter(parsed.errors.values()))


@bp.post("/chats/<int:conversation_id>/cards/<tool_use_id>")
@login_required
@message_rate_limit
def answer(conversation_id: int, tool_use_id: str):
    """A card answered on the page (a form post): its run goes on."""
    conversation = owned_conversation_for_turn(conversation_id)
    card_row = awaiting_card(db_session(), conversation.id)
    card = card_of(card_row)
    if (
        card_row is None
        or meta_of(card_row).get("awaiting") != tool_use_id
        or card is None
        or card.get("toolUseId") != tool_use_id
    ):
        return _refused(
            conversation.id, tool_use_id, 409, ErrorCode.CARD_NOT_AWAITING, NOT_AWAITING
        )

    parsed: ParsedAnswer | None = None
    if request.form.get(DISMISS_FIELD):
        result: dict[str, Any] | None = (
            {"approved": False} if is_confirmation(card) else {"dismissed": True}
        )
    elif is_confirmation(card):
        result = parse_confirmation(request.form)
        if result is None:
            message = "Choose Allow or Decline."
            return _refused(conversation.id, tool_use_id, 400, ErrorCode.INVALID_ANSWER, message)
    else:
        parsed = parse_answer(card, request.form)
        if parsed.errors:
            message = _first_error(parsed)
            return _refused(
                conversation.id, tool_use_id, 400, ErrorCode.INVALID_ANSWER, message, parsed
            )
        result = parsed.result
    assert result is not None  # an answer without errors has its result

    try:
        started = start_turn(conversation.id, CardAnswer(tool_use_id, result))
    except ApiError as error:
        if parsed is not None and error.status == 400:
            steps = card.get("steps") or []
            # A single-question card: the problem is with its one answer.
            key = steps[0]["id"] if len(steps) == 1 else ""
            parsed.errors[key] = error.message
        return _refused(
            conversation.id, tool_use_id, error.status, error.code, error.message, parsed
        )

    row = row_dict(started.rows[0])
    if wants_json() and not is_htmx():
        return jsonify({"runId": started.run.id, "row": row}), 202
    if not is_htmx():
        target = url_for("chat.show", conversation_id=conversation.id)
        return redirect(f"{target}#m-{row['sequence']}", 303)
    return render_template(
        "chat/_row.html", row=row, conversation_id=conversation.id
    ) + composer_html(conversation.id)
