"""One way to run a tool: every failure becomes an `is_error` result the model reads, so
a tool never crashes a run. Normal calls, card questions and approved calls all use it."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError

from app.accounts.projects import WRITE, allows, role_refusal
from app.llm.errors import (
    ModelError,
    StreamAborted,
    StreamCancelled,
    error_detail,
    plain_reason,
    redact,
)
from app.row_meta import Card
from app.telemetry import tracing
from app.tools.context import ToolContext
from app.tools.registry import Tool, invalid_input
from app.tools.results import Pause, ToolFailure, ToolResult

log = logging.getLogger(__name__)


def invoke(
    tool: Tool,
    context: ToolContext,
    arguments: dict[str, Any],
    *,
    approved: bool = False,
    answered: Card | None = None,
) -> ToolResult | Pause:
    """The handler's result (or its card); on any failure the tool's writes are rolled
    back and the model is told what went wrong. `approved`: the person allowed a held
    call, so its approved handler runs with the card's arguments. No transaction may be
    open on the context's session when it is called."""
    if context.session.in_transaction():
        # A programming error, not the tool's failure: a handler may do slow work (a
        # fetch, a model call) and must not hold a transaction, nor SQLite's write lock,
        # across it (see app/tools/registry.py). The caller commits before calling.
        raise RuntimeError(f"{tool.name} was called with a transaction open")
    traced_call = tracing.tool_call(
        tool.name, context.tool_use_id, tool.category, arguments, tool.origin
    )
    with traced_call as traced:
        refused = _role_refusal(tool, context)
        if refused is not None:
            traced.outcome("refused", refused)
            return ToolResult(refused, is_error=True, refused=True)
        outcome = _run(tool, context, arguments, approved, answered)
        traced.outcome(*_traced(outcome))
    return outcome


def _traced(outcome: ToolResult | Pause) -> tuple[str, Any]:
    """How a call came out, for its span (`held`: it waits on the person), and its result."""
    if isinstance(outcome, Pause):
        return "held", None
    return ("failed" if outcome.is_error else "ran"), outcome.content


def _run(
    tool: Tool,
    context: ToolContext,
    arguments: dict[str, Any],
    approved: bool,
    answered: Card | None,
) -> ToolResult | Pause:
    """The handler's result, every failure turned into an `is_error` result."""
    secrets = [context.settings.anthropic_api_key]
    try:
        if answered is not None and tool.on_answered is not None:
            outcome = tool.on_answered(context, answered)
        elif approved and tool.on_approved is not None:
            outcome = tool.on_approved(context, arguments)
        else:
            outcome = tool.handler(context, tool.typed(arguments))
    except (StreamCancelled, StreamAborted):
        raise  # the run is ending: not the tool's failure
    except ValidationError as invalid:
        # The loop checked the input already (`Tool.checked_input`); this is a caller that
        # did not, or a handler's own model refusing what it was given.
        context.session.rollback()
        return ToolResult(invalid_input(tool.name, invalid), True)
    except ToolFailure as failure:
        context.session.rollback()
        return ToolResult(str(failure), is_error=True)
    except ModelError as error:
        context.session.rollback()
        log.warning("tool %s: %s", tool.name, redact(error_detail(error), secrets))
        reason = plain_reason(error, secrets)
        return ToolResult(
            f"The {tool.name} tool could not get an answer from the model: {reason}", True
        )
    except Exception as error:
        if context.should_stop is not None and context.should_stop():
            # Stopped or deleted under the tool (its writes may find the chat gone).
            raise StreamCancelled() from error
        reference = uuid.uuid4().hex[:8]
        log.exception(
            "tool %s failed in run %s (reference %s)", tool.name, context.run_id, reference
        )
        context.session.rollback()
        return ToolResult(
            f"The {tool.name} tool failed unexpectedly (reference {reference}).", is_error=True
        )
    if isinstance(outcome, Pause | ToolResult):
        return outcome
    return ToolResult(outcome)


def _role_refusal(tool: Tool, context: ToolContext) -> str | None:
    """What the person's role in the chat's project refuses of this call (read at the
    call: a member removed or made a viewer mid-run is refused from the next call)."""
    role = context.role
    # The role's read ends here: a handler may do slow work first (a fetch), holding no
    # transaction (on SQLite, no write lock) across it.
    context.session.rollback()
    if role is None:
        return "You are no longer a member of this chat's project."
    if tool.writes and not allows(role, WRITE):
        return role_refusal(role)
    return None
