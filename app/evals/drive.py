"""One case through the real host loop: a fresh person and workspace, each message sent as
the chat page sends it (`submit_turn`), each run executed here, synchronously, by the
loop every executor runs (`execute_run`), and the cards the host shows answered as the
case's replies say. Then the transcript is read back from the rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.chat.loop import execute_run
from app.chat.runs import awaiting_card
from app.chat.shapes import meta_of
from app.chat.turn import CardAnswer, NewMessage, Turn, submit_turn
from app.chat.turn_checks import TurnRejected
from app.evals.cases import CardReply, EvalInputs
from app.evals.transcript import SavedOutput, Transcript, read_transcript
from app.evals.workspace import start_case, workspace_counts
from app.kinds import CardKind
from app.row_meta import Card
from app.services import Services
from app.workspace.models import Output


class CaseStopped(Exception):
    """A reply the case scripted does not fit the card the host showed: the case ends
    there, and the transcript says why."""


def run_case(services: Services, name: str, inputs: EvalInputs) -> Transcript:
    """Run the case and return its transcript (its `problems` say where it stopped early)."""
    with services.database.session() as session:
        user_id, chat_id, ids = start_case(session, inputs.setup)
        session.commit()
        transcript = Transcript(name, list(inputs.messages), ids)
        transcript.before = workspace_counts(session, user_id)
        # The outputs the setup saved: what a case that adapts one is judged against.
        setup_outputs = select(Output).where(Output.user_id == user_id).order_by(Output.id)
        transcript.references = [
            SavedOutput(o.id, o.agent, o.title, o.offer_id, o.content)
            for o in session.scalars(setup_outputs)
        ]
    replies = list(inputs.replies)
    try:
        for message in inputs.messages:
            _take_turn(services, chat_id, user_id, NewMessage(message))
            while replies:
                card = _waiting_card(services, chat_id)
                if card is None:
                    break
                answer = card_answer(card, replies.pop(0), ids)
                _take_turn(services, chat_id, user_id, CardAnswer(card["toolUseId"], answer))
    except CaseStopped as stopped:
        transcript.problems.append(str(stopped))
    writing = {tool.name for tool in services.tools.all() if tool.writes}
    with services.database.session() as session:
        read_transcript(session, transcript, chat_id, writing)
        transcript.after = workspace_counts(session, user_id)
    return transcript


def _take_turn(services: Services, chat_id: int, user_id: int, turn: Turn) -> None:
    with services.database.session() as session:
        try:
            started = submit_turn(session, services, chat_id, user_id, turn)
        except TurnRejected as refused:
            raise CaseStopped(f"the turn was refused: {refused.message}") from refused
        session.commit()
        run_id = started.run.id
    execute_run(services, run_id)


def _waiting_card(services: Services, chat_id: int) -> Card | None:
    with services.database.session() as session:
        row = awaiting_card(session, chat_id)
        return meta_of(row)["card"] if row is not None else None


def with_ids(value: Any, ids: dict[str, int]) -> Any:
    """`value` with each `$offer:<name>`, `$persona:<name>`, `$output:<title>` string the
    id the case's setup made."""
    if isinstance(value, str) and value.startswith("$") and value[1:] in ids:
        return ids[value[1:]]
    if isinstance(value, dict):
        return {key: with_ids(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [with_ids(item, ids) for item in value]
    return value


def card_answer(card: Card, reply: CardReply, ids: dict[str, int]) -> dict[str, Any]:
    """The answer the person gives `card`, as the chat page would post it."""
    if reply.result is not None:
        answer: dict[str, Any] = with_ids(reply.result, ids)
        return answer
    confirming = card["kind"] == CardKind.CONFIRMATION
    if reply.approve is not None:
        if not confirming:
            raise CaseStopped(f"expected a confirmation, the host asked with {card['tool']}")
        return {"approved": reply.approve}
    if confirming:
        raise CaseStopped(f"the host asked to confirm {card['tool']}; the reply did not approve")
    steps = card.get("steps") or []
    result_key = card.get("resultKey")
    if result_key is None:
        # A briefing of several steps: the reply's text answers its text steps, its choice
        # the options it matches; every other step takes its default (or first option).
        return {"answers": {step["id"]: _step_answer(step, reply, strict=False) for step in steps}}
    free_key = card.get("freeTextKey")
    if reply.text is not None and free_key:
        return {free_key: reply.text}
    if not steps:
        raise CaseStopped(f"the {card['tool']} card has no question")
    return {result_key: _step_answer(steps[0], reply, strict=True)}


def _step_answer(step: dict[str, Any], reply: CardReply, *, strict: bool) -> Any:
    options = step.get("options") or []
    if step.get("input") == "text":
        return reply.text or reply.choose or ""
    wanted = (reply.choose or reply.text or "").casefold()
    chosen = [
        o["value"] for o in options if wanted and wanted in str(o.get("label", "")).casefold()
    ]
    if not chosen and reply.text is not None and step.get("allowFreeText"):
        return reply.text
    if not chosen and wanted and strict:
        labels = ", ".join(str(o.get("label")) for o in options)
        raise CaseStopped(f"no option of “{step.get('title')}” matches {wanted!r} ({labels})")
    picked = chosen or [step.get("default", options[0]["value"] if options else "")]
    return picked if step.get("input") == "multi" else picked[0]
