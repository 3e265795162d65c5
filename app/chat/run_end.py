"""How a run ends, a part of HostLoop (app/chat/loop.py): its last row and final status, its
usage event, its steps and log, and the conversation as the list shows it, each in one
transaction; a failure's error row; a stopped regenerate's older answer shown again.

A run that ends with the model's answer writes that answer's row in the transaction that
finishes it: the frames are published after the commit, in the order a reader expects
(the row, the timeline's last step, the steps, Done), and counted in the log beforehand so
the finishing transaction writes the whole log."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select

from app import events as ev
from app.billing.meter import record_run_usage
from app.chat.branches import restore_unanswered_fork
from app.chat.conversations import conversation_dict, row_dict
from app.chat.models import Conversation, Message, Run, RunStatus
from app.chat.rows import insert_message
from app.chat.runs import finish_run, run_status
from app.kinds import RowKind
from app.llm.client import AssistantTurn

log = logging.getLogger(__name__)

_conversations = Conversation.__table__
# What the person's conversation list shows of it, read once the run has ended.
_LIST_ITEM = select(
    _conversations.c.id,
    _conversations.c.title,
    _conversations.c.status,
    _conversations.c.updated_at,
).where(_conversations.c.id == bindparam("conversation_id"))
EMPTY_ANSWER = "(The model returned an empty answer.)"


class MeteredRun(NamedTuple):
    """The run as metering reads it, from what its claim returned (no read of the row)."""

    id: int
    user_id: int
    conversation_id: int
    turn_index: int


class RunCancelled(Exception):
    """The run was stopped, reclaimed or deleted: it writes nothing more."""


def assistant_row(turn: AssistantTurn) -> tuple[str, dict[str, Any]]:
    """The content and meta of the row that keeps a model turn (hidden when it has no
    text: the model still reads its blocks)."""
    text = turn.text.strip()
    meta: dict[str, Any] = {"blocks": turn.content, "stop_reason": turn.stop_reason}
    if not text:
        meta["hidden"] = True
    if not turn.content:
        # An empty answer still needs a row the person can see.
        meta = {"hidden": False}
        text = EMPTY_ANSWER
    return text, meta


class RunEnd:
    """HostLoop's ending (it provides services, settings, the run's ids and turn index,
    emit, the run log, steps and the counts metering reads)."""

    def answer(self, turn: AssistantTurn, presenting: bool):
        """The model answered without tools: the run's end and its row in one transaction,
        then the frames. Nothing is written when the run ended elsewhere (stopped,
        reclaimed as stale, deleted): it ends as it was left."""
        text, meta = assistant_row(turn)
        with self.services.database.session() as session:
            # The run's row before its conversation's, in the order Stop and the stale
            # sweep take them (on PostgreSQL the opposite order deadlocks with them).
            if not finish_run(session, self.run_id, RunStatus.COMPLETED):
                return self.ended_elsewhere(session), None
            row = insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind=RowKind.HOST,
                content=text,
                meta=meta,
            )
            shown = None if row.hidden else ev.RowPersisted(row_dict(row), self.run_id)
            closing = ev.Timeline(self.run_id, "presenting", "done") if presenting else None
            if shown is not None:
                self.steps.row_shown(shown.row)
            self.count_frames(*(e.kind for e in (shown, closing) if e is not None), ev.Done.kind)
            changed = self.ended(session, known_run=True)
            session.commit()
        for event in (shown, closing):
            if event is not None:
                self.services.hub.publish(self.conversation_id, event)
        return RunStatus.COMPLETED, changed

    def count_frames(self, *kinds: str) -> None:
        """Count frames that are published after the commit about to write the log."""
        for kind in kinds:
            self.run_log.frame(kind)
        self.done_counted = self.done_counted or ev.Done.kind in kinds

    def finish(self, status: RunStatus) -> tuple[str, ev.ConversationChanged | None]:
        """The final status with the rest of the run's end: one transaction."""
        self.count_frames(ev.Done.kind)
        with self.services.database.session() as session:
            if not finish_run(session, self.run_id, status):
                return self.ended_elsewhere(session), None
            changed = self.ended(session, known_run=True)
            session.commit()
        return status, changed

    def ended_elsewhere(self, session) -> str:
        """The status of a run someone else ended first, as they left it: cancelled (Stop),
        error (the stale sweep), or gone with its conversation (taken as cancelled)."""
        ended = run_status(session, self.run_id)
        session.commit()
        return ended or RunStatus.CANCELLED

    def ended(self, session, known_run: bool = False) -> ev.ConversationChanged | None:
        """In the finishing transaction, after the run's final status: its usage, its steps
        kept on its first shown row, its log, and its conversation's list item."""
        if self.model_answers:
            self.meter(session, known_run)
        self.steps_row = self.steps.keep(session, self.conversation_id)
        if self.steps_row is not None:
            self.count_frames(ev.RowPersisted.kind)  # pushed again with them, before Done
        self.run_log.write(session)
        return self.conversation_changed(session)

    def meter(self, session=None, known_run: bool = False) -> None:
        """The run's usage event (in the caller's transaction, inside a savepoint, or its
        own). Metering trouble is logged and never fails a run the person already has.
        `known_run`: the run exists (the caller just finished it), so the claim's values
        do instead of reading its row."""
        try:
            if session is None:
                with self.services.database.session() as own:
                    self._record_usage(own, known_run)
                    own.commit()
                return
            with session.begin_nested():
                self._record_usage(session, known_run)
        except Exception:
            log.exception("run %s: usage could not be metered", self.run_id)

    def _record_usage(self, session, known_run: bool) -> None:
        if known_run and self.turn_index is not None:
            run = MeteredRun(self.run_id, self.user_id, self.conversation_id, self.turn_index)
        else:
            run = session.get(Run, self.run_id)
        if run is not None:  # gone with its conversation: nothing to meter
            record_run_usage(session, self.settings, run, self.billable_calls)

    def conversation_changed(self, session=None) -> ev.ConversationChanged | None:
        """What the person's conversation list shows now (status and title)."""
        if session is None:
            with self.services.database.session() as own:
                return self.conversation_changed(own)
        item = session.execute(_LIST_ITEM, {"conversation_id": self.conversation_id}).first()
        if item is None:
            return None
        return ev.ConversationChanged(conversation_dict(item))

    def keep_steps(self) -> None:
        """The run's steps stay on its first shown row (written with the run's final status
        when it finished normally, else now); open pages get the row again, with them."""
        try:
            if self.steps_row is None and self.steps.items and not self.steps.kept:
                with self.services.database.session() as session:
                    self.steps_row = self.steps.keep(session, self.conversation_id)
                    session.commit()
                if self.steps_row is not None:
                    self.run_log.frame(ev.RowPersisted.kind)
            if self.steps_row is not None:
                row = ev.RowPersisted(row_dict(self.steps_row), self.run_id)
                self.services.hub.publish(self.conversation_id, row)
        except Exception:
            log.exception("run %s: its steps could not be kept", self.run_id)

    def restore_unanswered_fork(self) -> None:
        """A regenerate stopped before its first row shows the older answer again."""
        try:
            with self.services.database.session() as session:
                if restore_unanswered_fork(session, self.conversation_id):
                    session.commit()
        except Exception:
            log.exception("run %s: the shown branch could not be restored", self.run_id)

    def deleted(self) -> bool:
        """The run is gone: deleted with its conversation (False when that cannot be read:
        the failure is then reported as one)."""
        try:
            with self.services.database.session() as session:
                return run_status(session, self.run_id) is None
        except Exception:
            return False

    def fail(self, code: str, message: str) -> str:
        """The run ends in an error row the person sees, and an error frame (nothing when
        it ended elsewhere meanwhile: stopped, reclaimed, or deleted with its chat)."""
        self.run_log.error(code, message)
        with self.services.database.session() as session:
            # The run's row first, as in `answer`.
            if not finish_run(session, self.run_id, RunStatus.ERROR, error=f"{code}: {message}"):
                return self.ended_elsewhere(session)
            row: Message = insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind=RowKind.ERROR,
                content=message,
                meta={"code": code},
            )
            session.commit()
        self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        self.emit(ev.RunError(code, message, self.run_id))
        return RunStatus.ERROR
