"""A run, then the chat's queue: once a run completes, the oldest queued message starts
the next run (app/chat/queue.py), handed to `submit` as a sent message's run is. Both
executors run runs through here (app/chat/executor.py, app/chat/worker.py), so the queue
drains in whichever process ran the run."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app import events as ev
from app.chat.conversations import conversation_dict, row_dict
from app.chat.models import Conversation
from app.chat.queue import queue_items, take_next
from app.chat.run_services import RunServices
from app.chat.run_state import RunIds
from app.chat.turn_checks import TurnRejected
from app.telemetry import tracing

log = logging.getLogger(__name__)


def run_then_drain(services: RunServices, run_id: int, submit: Callable[[int], None]) -> str | None:
    """Execute the run; when it completed with messages in its chat's queue, start the
    oldest and `submit` its run. Returns the run's status (None: not this process's)."""
    from app.chat.loop import execute_run  # the loop is heavy: imported when a run runs

    def drain(ids: RunIds) -> None:
        next_run = drain_queue(services, ids.conversation_id, ids.user_id)
        if next_run is not None:
            submit(next_run)

    with tracing.run_span(run_id) as traced:
        status = execute_run(services, run_id, drain)
        tracing.run_ended(traced, status)
    return status


def drain_queue(services: RunServices, conversation_id: int, user_id: int) -> int | None:
    """The oldest queued message of the chat started as its next run, in the transaction
    that takes it off the queue; then every open page hears of it. The new run's id, or
    None (nothing queued, or no turn may start now: it stays queued)."""
    try:
        with services.database.session() as session:
            try:
                started = take_next(session, services.settings, conversation_id, user_id)
            except TurnRejected as refused:
                session.rollback()
                log.info("chat %s: its queue waits (%s)", conversation_id, refused.code)
                return None
            if started is None:
                return None
            items = queue_items(session, conversation_id)
            changed = conversation_dict(session.get_one(Conversation, conversation_id))
            session.commit()
    except Exception:
        log.exception("chat %s: its queue could not be drained", conversation_id)
        return None
    hub = services.hub
    for row in started.rows:
        hub.publish(conversation_id, ev.RowPersisted(row_dict(row), started.run.id))
    hub.publish(conversation_id, ev.Status(started.run.id, "thinking", int(time.time() * 1000)))
    hub.publish(conversation_id, ev.QueueChanged(items))
    hub.publish_user(user_id, ev.ConversationChanged(changed))
    return started.run.id
