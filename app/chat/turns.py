"""Starting a turn: persist what the person sent (a message or a card answer) and create
the run, in one transaction. Shared by the JSON API and the chat page."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.chat.attachments import pending_attachments
from app.chat.branches import Tree, current_leaf, show_branch
from app.chat.models import (
    TITLE_DEFAULT,
    TITLE_MESSAGE,
    Conversation,
    Message,
    Run,
)
from app.chat.rows import insert_message, insert_tool_result
from app.chat.run_services import RunServices
from app.chat.runs import (
    RunConflict,
    approved_not_run,
    awaiting_card,
    start_run,
    waiting,
)
from app.chat.search import index_row
from app.chat.shapes import is_confirmation, meta_of
from app.chat.toolset import run_tools
from app.chat.turn_checks import TurnRejected, locked_conversation, locked_idle_conversation
from app.config import Settings
from app.error_codes import ErrorCode
from app.kinds import CardStatus, RowKind
from app.row_meta import Card, UserMeta
from app.telemetry import metrics
from app.tools.context import ToolContext
from app.tools.project_choice import SELECT_PROJECT
from app.tools.results import ToolFailure
from app.workspace.attachments import file_chips, note_for


@dataclass
class StartedTurn:
    run: Run
    rows: list[Message] = field(default_factory=list)


def _tool_result_row(
    session: Session, conversation_id: int, card: Card, result: dict[str, Any]
) -> Message:
    return insert_tool_result(session, conversation_id, card["toolUseId"], card["tool"], result)


def _close_card(
    session: Session, card_row: Message, status: CardStatus, answer: dict[str, Any]
) -> None:
    card: Card = {**meta_of(card_row)["card"], "status": status, "answer": answer}
    card_row.meta = {**card_row.meta, "card": card, "awaiting": None}
    index_row(session, card_row)  # the answer is searchable too


def _start(
    session: Session, conversation: Conversation, trigger: str, rows: list[Message]
) -> StartedTurn:
    try:
        run = start_run(session, conversation, trigger)
    except RunConflict as error:
        raise TurnRejected(
            409, ErrorCode.RUN_IN_FLIGHT, "A reply is already being written in this chat."
        ) from error
    return StartedTurn(run=run, rows=rows)


def submit_message(
    session: Session,
    settings: Settings,
    conversation_id: int,
    user_id: int,
    text: str,
    untrusted: list[dict[str, Any]] | None = None,
    trigger: str = "message",
) -> StartedTurn:
    """A new message. A card still waiting is dismissed with the message, so the
    conversation never deadlocks on an unanswered question. `untrusted`: the untrusted
    content the text was written from (a starter made from a web page), kept on its row.
    `trigger`: the run's (`schedule` for a scheduled message, app/chat/scheduler.py)."""
    conversation = locked_conversation(session, settings, conversation_id, user_id)
    rows = _close_waiting(session, conversation.id, {"dismissed": True, "user_message": text})
    # The model is told about files attached since the person last wrote (the visible
    # row keeps just what they typed).
    files = pending_attachments(session, conversation.id)
    rows.append(
        _user_row(session, conversation.id, text, note_for(files), file_chips(files), untrusted)
    )
    if conversation.title_source == TITLE_DEFAULT:
        # A placeholder until the fast model names the chat (app/chat/titles.py).
        conversation.title = _title_from(text)
        conversation.title_source = TITLE_MESSAGE
    return _start(session, conversation, trigger, rows)


def _close_waiting(
    session: Session, conversation_id: int, dismissal: dict[str, Any]
) -> list[Message]:
    """Close what waits at the shown branch's end before the conversation moves on: a card
    still waiting is dismissed (`dismissal` is its tool result), an approved confirmation
    its run never carried out is closed as not run. Returns the card row it changed."""
    rows: list[Message] = []
    # One read of the latest card answers both questions (it is the same row either way).
    latest = _latest_card_to_close(session, conversation_id)
    card_row = waiting(latest)
    if card_row is not None:
        if is_confirmation(meta_of(card_row)["card"]):
            metrics.held_answered(meta_of(card_row)["card"]["tool"], "dismissed")
        _tool_result_row(session, conversation_id, meta_of(card_row)["card"], dismissal)
        _close_card(session, card_row, CardStatus.DISMISSED, dismissal)
        rows.append(card_row)
    approved_row = approved_not_run(latest)
    if approved_row is not None:
        # Approved, but its run never carried it out (stopped, or failed first): the new
        # message closes it, so no later run does something the person has moved on from.
        card = meta_of(approved_row)["card"]
        _tool_result_row(session, conversation_id, card, {"approved": True, "message": NOT_RUN})
        executed: Card = {**card, "executed": True}
        approved_row.meta = {**approved_row.meta, "card": executed}
    return rows


_messages = Message.__table__
# Read on every new message, built once: the latest card's meta alone, since it usually
# waits for nothing and then no row object is needed.
_LATEST_CARD_META = (
    select(_messages.c.id, _messages.c.meta)
    .where(
        _messages.c.conversation_id == bindparam("conversation_id"),
        _messages.c.kind == RowKind.CARD,
    )
    .order_by(_messages.c.sequence.desc())
    .limit(1)
)


def _latest_card_to_close(session: Session, conversation_id: int) -> Message | None:
    """The latest card row when it still waits or was approved and not carried out."""
    latest = session.execute(_LATEST_CARD_META, {"conversation_id": conversation_id}).first()
    # `waiting` and `approved_not_run` read only `.meta`, which the result row has.
    as_row = cast(Message, latest)
    if latest is None or (waiting(as_row) is None and approved_not_run(as_row) is None):
        return None
    return session.get(Message, latest.id)


def _user_row(
    session: Session,
    conversation_id: int,
    text: str,
    note: str,
    files: list[dict[str, Any]],
    untrusted: list[dict[str, Any]] | None,
) -> Message:
    """`files`: the attachments the message went with, shown on its row. `untrusted`: what
    the text was written from, when not the person (it taints the conversation, and its
    addresses do not count as typed: app/chat/taint.py)."""
    model_text = f"{text}\n\n{note}" if note else text
    meta: UserMeta = {"blocks": [{"type": "text", "text": model_text}]}
    if files:
        meta["files"] = files
    if untrusted:
        meta["untrusted"] = untrusted
    return insert_message(
        session, conversation_id, role="user", kind=RowKind.USER, content=text, meta=meta
    )


# -- branches: regenerate, edit, choose (app/chat/branches.py) --------------------------

# What a regenerate may name: any row of an answer (one that ends on a notice, Stop before
# any text, has its one action row on that notice).
ANSWER_KINDS = (RowKind.HOST, RowKind.CARD, RowKind.AGENT_OUTPUT, RowKind.ERROR, RowKind.NOTICE)
LEFT_BRANCH = {"dismissed": True}  # a card waiting on a branch that is left


def _row_or_404(tree: Tree, sequence: int, *kinds: str) -> Message:
    row = tree.rows.get(sequence)
    if row is None or row.kind not in kinds:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "There is no such message in this chat.")
    return row


def _move_to(session: Session, conversation: Conversation, tree: Tree, leaf: int | None) -> bool:
    """Show the branch ending at `leaf`, closing what waits on the branch left first.
    False when that branch is already the one shown."""
    if leaf == current_leaf(session, conversation):
        return False
    _close_waiting(session, conversation.id, LEFT_BRANCH)
    show_branch(session, conversation, tree, leaf)
    return True


def submit_regenerate(
    session: Session, settings: Settings, conversation_id: int, user_id: int, sequence: int
) -> StartedTurn:
    """A new answer to the person's message that a host row answers, beside the old one:
    the branch shown ends at that message and a run answers it anew."""
    conversation = locked_conversation(session, settings, conversation_id, user_id)
    tree = Tree.load(session, conversation.id)
    answer = _row_or_404(tree, sequence, *ANSWER_KINDS)
    if answer.role != "assistant":
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "There is no such message in this chat.")
    message = tree.nearest_user_row(answer.sequence)
    if message is None:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "That row answers no message of yours.")
    _move_to(session, conversation, tree, message.sequence)
    return _start(session, conversation, "regenerate", [])


def submit_edit(
    session: Session,
    settings: Settings,
    conversation_id: int,
    user_id: int,
    sequence: int,
    text: str,
    untrusted: list[dict[str, Any]] | None = None,
) -> StartedTurn:
    """A new version of one of the person's messages, beside the old one, answered anew
    (`untrusted` as for `submit_message`)."""
    conversation = locked_conversation(session, settings, conversation_id, user_id)
    tree = Tree.load(session, conversation.id)
    original = _row_or_404(tree, sequence, "user")
    fork = original.parent_sequence
    dismissal = tree.rows.get(fork) if fork is not None else None
    if dismissal is not None and _dismissed_by(dismissal, original.content):
        # The message dismissed a card (its tool result quotes it): the new version
        # dismisses that card with its own words, on a branch of its own.
        fork = dismissal.parent_sequence
    _move_to(session, conversation, tree, fork)
    if fork is not None and fork != original.parent_sequence:
        card_row = tree.rows[fork]
        card = meta_of(card_row)["card"]  # the card the original message dismissed
        _tool_result_row(session, conversation.id, card, {"dismissed": True, "user_message": text})
    # Files the old version announced stay announced, and any attached since.
    pending = pending_attachments(session, conversation.id)
    notes = [_note_of(original), note_for(pending)]
    note = "\n".join(dict.fromkeys(line for n in notes for line in n.splitlines() if line))
    files = list(meta_of(original).get("files") or [])
    files += [f for f in file_chips(pending) if f["id"] not in {o["id"] for o in files}]
    row = _user_row(session, conversation.id, text, note, files, untrusted)
    return _start(session, conversation, "edit", [row])


def _dismissed_by(row: Message | None, text: str) -> bool:
    if row is None or row.kind != RowKind.TOOL_RESULT:
        return False
    for block in meta_of(row).get("blocks", []):
        try:
            result = json.loads(block.get("content") or "")
        except (TypeError, ValueError):
            continue
        if (
            isinstance(result, dict)
            and result.get("dismissed")
            and result.get("user_message") == text
        ):
            return True
    return False


def _note_of(row: Message) -> str:
    """The attachment lines the model saw with a message (after what was typed)."""
    blocks = meta_of(row).get("blocks") or [{}]
    model_text = str(blocks[0].get("text", ""))
    if model_text.startswith(row.content):
        return model_text[len(row.content) :].strip()
    return ""


def choose_branch(session: Session, conversation_id: int, user_id: int, sequence: int) -> bool:
    """Show the branch through the row `sequence`: the one already shown when it runs
    through that row, else that row's newest branch. True when the shown branch changed."""
    conversation = locked_idle_conversation(session, conversation_id, user_id)
    tree = Tree.load(session, conversation.id)
    if sequence not in tree.rows:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "There is no such message in this chat.")
    if tree.on_path(sequence, current_leaf(session, conversation)):
        return False
    return _move_to(session, conversation, tree, tree.newest_descendant(sequence))


def submit_tool_response(
    session: Session,
    services: RunServices,
    conversation_id: int,
    user_id: int,
    tool_use_id: str,
    result: dict[str, Any],
) -> StartedTurn:
    """The person's answer to the card that is waiting; it resumes the run."""
    conversation = locked_conversation(session, services.settings, conversation_id, user_id)
    card_row = awaiting_card(session, conversation.id)
    if card_row is None or meta_of(card_row).get("awaiting") != tool_use_id:
        raise TurnRejected(
            409,
            ErrorCode.CARD_NOT_AWAITING,
            "That question is not waiting for an answer (it was answered, dismissed or never asked).",
        )
    card = meta_of(card_row)["card"]
    if is_confirmation(card):
        return _answer_confirmation(session, conversation, card_row, result)
    if result.get("dismissed") is True:
        answer = {"dismissed": True}
        if isinstance(result.get("user_message"), str):
            answer["user_message"] = result["user_message"][:2000]
        status = CardStatus.DISMISSED
    else:
        problem = _check_answer(session, services, conversation, user_id, card, result)
        if problem:
            raise TurnRejected(400, ErrorCode.INVALID_ANSWER, problem)
        answer, status = result, CardStatus.ANSWERED
        if card["tool"] == SELECT_PROJECT:
            # The chat works in the chosen project from the resumed run on.
            conversation.project_id = result["project_id"]
            conversation.project_chosen = True
        if card.get("resume"):
            # A tool's own question mid-call: the resumed run goes on with the call (as
            # an approved confirmation), whose result the model then reads.
            _close_card(session, card_row, status, answer)
            to_run: Card = {**meta_of(card_row)["card"], "executed": False}
            card_row.meta = {**card_row.meta, "card": to_run}
            return _start(session, conversation, "tool_response", [card_row])
    _tool_result_row(session, conversation.id, card, answer)
    _close_card(session, card_row, status, answer)
    return _start(session, conversation, "tool_response", [card_row])


NOT_RUN = (
    "The person approved this action, but it was not carried out before they sent a new "
    "message. Do not run it now unless they ask again."
)
DECLINED = (
    "The person declined this action, so it was not carried out. Do not retry it unless they ask."
)


def _answer_confirmation(
    session: Session, conversation: Conversation, card_row: Message, result: dict[str, Any]
) -> StartedTurn:
    """Approval runs the held call in the resumed run (bound to the card's exact
    arguments, once); declining tells the model at once."""
    approved = result.get("approved")
    if result.get("dismissed") is True:
        approved = False
    if not isinstance(approved, bool):
        raise TurnRejected(
            400,
            ErrorCode.INVALID_ANSWER,
            'Answer a confirmation with {"approved": true} or {"approved": false}.',
        )
    card = meta_of(card_row)["card"]
    metrics.held_answered(card["tool"], "approved" if approved else "declined")
    if approved:
        _close_card(session, card_row, CardStatus.ANSWERED, {"approved": True})
        closed: Card = {**meta_of(card_row)["card"], "executed": False}
        card_row.meta = {**card_row.meta, "card": closed}
    else:
        _tool_result_row(session, conversation.id, card, {"approved": False, "message": DECLINED})
        _close_card(session, card_row, CardStatus.ANSWERED, {"approved": False})
    return _start(session, conversation, "tool_response", [card_row])


def _check_answer(
    session: Session,
    services: RunServices,
    conversation: Conversation,
    user_id: int,
    card: Card,
    result: dict[str, Any],
) -> str | None:
    tool = services.tools.get(card["tool"])
    if tool is None:
        tool = run_tools(session, services, user_id).get(card["tool"])  # an outside one
    if tool is None or tool.check_response is None:
        return None
    context = ToolContext(
        session=session,
        user_id=user_id,
        conversation_id=conversation.id,
        run_id=0,
        services=services,
        emit=lambda _event: None,
        tool_use_id=card["toolUseId"],
        chat_project_id=conversation.project_id,  # the answer's ids are the chat's project's
    )
    try:
        return tool.check_response(context, card, result)
    except ToolFailure as failure:
        return str(failure)


def _title_from(text: str) -> str:
    first_line = " ".join(text.split())
    return first_line[:60] + ("…" if len(first_line) > 60 else "")
