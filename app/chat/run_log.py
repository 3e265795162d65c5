"""Run logs: what one run did, step by step, for `flask chat-logs` and the admin area.

The loop records model calls (request sizes, stop reason, token usage, duration), tool
calls (input and output, secrets redacted, capped), the frames it emitted (counted per
type, never their text) and errors: what the person was told, and for a model error the
server's full reason. Entries are buffered in memory and written in one
short transaction per flush; the loop flushes around every model call and at the end,
so a run killed mid-way keeps its log up to its last step.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.chat.feedback import AnswerFeedback, feedback_of_runs
from app.chat.models import Run, RunLogEntry
from app.config import Settings
from app.db import Database, utcnow

if TYPE_CHECKING:
    from app.llm.client import AssistantTurn

MODEL_CALL, TOOL_CALL, FRAMES, ERROR = "model_call", "tool_call", "frames", "error"
# What the model server said when it refused (status, type, its whole message).
MODEL_ERROR = "model_error"
# Each tool input, tool output and error message is stored up to this many characters.
MAX_FIELD_CHARS = 4_000
REDACTED = "[redacted]"
# Entries are written as one Core INSERT of many rows: nothing is read back, so the ORM's
# unit of work (an INSERT ... RETURNING per entry) is not needed.
_INSERT_ENTRIES = insert(cast(Table, RunLogEntry.__table__))  # typed as any FromClause

log = logging.getLogger(__name__)

# Values under keys with these names are secrets whatever they look like.
SECRET_KEY_NAMES = re.compile(
    r"(^|_)(password|passwd|secret|api_?key|access_?token|auth_?token|token|authorization"
    r"|cookie|credentials?|private_?key)$",
    re.IGNORECASE,
)
# Secrets that announce themselves: model and provider API keys, our bearer tokens, an
# Authorization header's value, and the user:password part of a URL.
SECRET_PATTERNS = (
    re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bld_[A-Za-z0-9_\-]{20,}"),
    re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)


def elapsed_ms(started: float) -> int:
    """Milliseconds since a `time.monotonic()` reading."""
    return round((time.monotonic() - started) * 1000)


class Redactor:
    """Takes secrets out of what a run log stores: the values of this deployment's own
    secret settings wherever they appear, secret-named keys, and self-announcing tokens."""

    def __init__(self, settings: Settings):
        self.values = sorted(_secret_values(settings), key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.values:
            value = value.replace(secret, REDACTED)
        for pattern in SECRET_PATTERNS:
            value = pattern.sub(REDACTED, value)
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if _is_secret_key(k, v) else self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _is_secret_key(key: Any, value: Any) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY_NAMES.search(key)) and bool(value)


def _secret_values(settings: Settings) -> set[str]:
    values = {settings.secret_key, settings.anthropic_api_key, settings.image_provider_key}
    for url in (settings.database_url, settings.redis_url):
        if url:
            values.add(urlsplit(url).password)
    # Very short values (a test's "x") would blank out ordinary words.
    return {v for v in values if v and len(v) >= 6}


def capped(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated: {len(text):,} characters in all]"


@dataclass
class ModelCall:
    """What the loop hands back from inside `RunLog.model_call`: the turn, once answered."""

    turn: AssistantTurn | None = None


def _error_text(error: BaseException) -> str:
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or str(error)
    name = code or type(error).__name__
    return f"{name}: {message}" if message else name


class RunLog:
    """The recorder one run uses. Recording is cheap and never touches the database;
    `flush` writes what was recorded since the last flush. Thread-safe: frames may be
    emitted from another thread than the loop's."""

    def __init__(self, database: Database, settings: Settings, run_id: int, conversation_id: int):
        self.database = database
        self.enabled = settings.run_logs
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.redactor = Redactor(settings)
        self._pending: list[dict[str, Any]] = []
        self._frames: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def model_call(
        self, request: dict[str, Any], estimated_input_tokens: int
    ) -> Iterator[ModelCall]:
        """Record the model call made inside the block: its request sizes, then the turn
        set on the yielded record (stop reason, usage) or the error that ended it, and
        its duration. What led to the call is written before it (a call that never ends
        keeps the steps that led to it); the call itself goes with the turn the loop
        persists next, or at once when the call failed."""
        self.flush()  # usually nothing left: the loop wrote the log with the iteration
        call = ModelCall()
        started = time.monotonic()
        error = None
        try:
            yield call
        except BaseException as failure:
            error = failure
            raise
        finally:
            data = self._model_call_data(request, estimated_input_tokens, call, started, error)
            self._add(MODEL_CALL, data)
            if error is not None:
                self.flush()  # else the loop writes it with the turn it persists next

    def _model_call_data(
        self,
        request: dict[str, Any],
        estimated_input_tokens: int,
        call: ModelCall,
        started: float,
        error: BaseException | None = None,
    ) -> dict[str, Any]:
        thinking = request.get("thinking") or {}
        turn = call.turn
        data = {
            "model": request.get("model"),
            "messages": len(request.get("messages") or ()),
            "tools": len(request.get("tools") or ()),
            "tool_choice": (request.get("tool_choice") or {}).get("type"),
            "thinking": thinking.get("budget_tokens")
            if thinking.get("type") == "enabled"
            else None,
            "max_tokens": request.get("max_tokens"),
            "estimated_input_tokens": estimated_input_tokens,
            "stop_reason": getattr(turn, "stop_reason", None),
            "usage": dict(getattr(turn, "usage", None) or {}),
            "duration_ms": elapsed_ms(started),
        }
        if error is not None:
            data["error"] = capped(self.redactor.text(_error_text(error)))
            data["error_status"] = getattr(error, "status", None)
        return data

    def tool_call(
        self,
        name: str,
        tool_use_id: str,
        input: Any,
        output: Any,
        is_error: bool,
        duration_ms: int,
        coerced: tuple[str, ...] = (),
    ) -> None:
        entry = {
            "name": name,
            "tool_use_id": tool_use_id,
            "input": self._field(input),
            "output": self._field(output),
            "is_error": bool(is_error),
            "duration_ms": duration_ms,
        }
        if coerced:
            # Quoted numbers or booleans taken as such: worth knowing when a model misbehaves.
            entry["coerced"] = list(coerced)
        self._add(TOOL_CALL, entry)

    def frame(self, kind: str) -> None:
        if self.enabled:
            with self._lock:
                self._frames[kind] += 1

    def error(self, code: str, message: str) -> None:
        self._add(ERROR, {"code": code, "message": capped(self.redactor.text(message))})

    def model_error(self, error: Any) -> None:
        """The model error a run ended with, in full: its HTTP status, type and the
        server's whole message (redacted, capped), whatever call raised it."""
        self._add(
            MODEL_ERROR,
            {
                "status": getattr(error, "status", None),
                "code": getattr(error, "code", None) or type(error).__name__,
                "message": capped(self.redactor.text(getattr(error, "message", str(error)))),
            },
        )

    def exception(self) -> None:
        """The exception being handled, with the end of its traceback (where it failed)."""
        trace = self.redactor.text(traceback.format_exc())
        if len(trace) > MAX_FIELD_CHARS:
            trace = "… " + trace[-MAX_FIELD_CHARS:]
        self._add(ERROR, {"code": "exception", "message": trace})

    def flush(self) -> None:
        """Write what was recorded since the last flush, with the frame counts so far, in
        one short transaction. A failure here is the log's loss, never the run's."""
        entries = self._take()
        if not entries:
            return
        try:
            with self.database.session() as session:
                session.execute(_INSERT_ENTRIES, entries)
                session.commit()
        except IntegrityError:
            # Entries reference only their run and conversation: both were deleted (the
            # person deleted the chat), and the log would have gone with them.
            log.info("run %s: deleted, %d log entries dropped", self.run_id, len(entries))
        except Exception:
            log.warning("run %s: could not write %d log entries", self.run_id, len(entries))

    def write(self, session: Session) -> None:
        """Add what was recorded since the last flush to the caller's transaction (the
        loop writes the log together with its own rows: one transaction, not two)."""
        entries = self._take()
        if entries:
            session.execute(_INSERT_ENTRIES, entries)

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            entries, self._pending = self._pending, []
            if self._frames:
                entries.append(self._entry(FRAMES, {"counts": dict(self._frames)}))
                self._frames = Counter()
        return entries

    def _field(self, value: Any) -> str:
        """Redacted, as text (JSON for structured values), capped."""
        value = self.redactor.data(value)
        text = (
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        )
        return capped(text)

    def _add(self, kind: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        entry = self._entry(kind, data)
        with self._lock:
            self._pending.append(entry)

    def _entry(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """A run_log_entries row's values."""
        # Stamped when the step began, so a slow call reads as started, then took N ms.
        began = utcnow() - timedelta(milliseconds=data.get("duration_ms", 0))
        return {
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "at": began,
            "kind": kind,
            "data": data,
        }


# -- reading -----------------------------------------------------------------------------


@dataclass
class RunReport:
    """One run and its log, as `flask chat-logs` and the admin page show it, with the
    feedback given on the answers it wrote."""

    run: Run
    entries: list[RunLogEntry]
    feedback: list[AnswerFeedback] = field(default_factory=list)

    @property
    def started(self) -> datetime:
        return self.run.started_at or self.run.created_at

    @property
    def duration(self) -> str:
        if self.run.finished_at is None:
            return "not finished"
        return _seconds((self.run.finished_at - self.started).total_seconds())

    def frame_counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for entry in self.entries:
            if entry.kind == FRAMES:
                total.update(entry.data.get("counts", {}))
        return dict(total.most_common())

    def model_calls(self) -> int:
        return sum(1 for entry in self.entries if entry.kind == MODEL_CALL)

    def tokens(self) -> tuple[int, int]:
        usages = [e.data.get("usage") or {} for e in self.entries if e.kind == MODEL_CALL]
        return (
            sum(u.get("input_tokens", 0) for u in usages),
            sum(u.get("output_tokens", 0) for u in usages),
        )

    def offset(self, entry: RunLogEntry) -> str:
        return "+" + _seconds((entry.at - self.started).total_seconds())

    def header(self) -> str:
        tokens_in, tokens_out = self.tokens()
        run = self.run
        parts = [
            f"Run {run.id}",
            run.status,
            f"started {_timestamp(self.started)}",
            f"took {self.duration}",
            _plural(self.model_calls(), "model call"),
            f"{tokens_in:,} tokens in / {tokens_out:,} out",
            _plural(sum(self.frame_counts().values()), "frame") + " sent",
        ]
        if run.error:
            parts.append(f"error: {run.error}")
        return " · ".join(parts)


def load_reports(
    session: Session, conversation_id: int, run_id: int | None = None
) -> list[RunReport]:
    """The conversation's runs (or the one run), oldest first, each with its entries."""
    query = select(Run).where(Run.conversation_id == conversation_id).order_by(Run.id)
    if run_id is not None:
        query = query.where(Run.id == run_id)
    runs = list(session.scalars(query))
    entries = session.scalars(
        select(RunLogEntry)
        .where(RunLogEntry.run_id.in_([run.id for run in runs]))
        .order_by(RunLogEntry.run_id, RunLogEntry.id)
    )
    by_run: dict[int, list[RunLogEntry]] = {run.id: [] for run in runs}
    for entry in entries:
        by_run[entry.run_id].append(entry)
    rated = feedback_of_runs(session, by_run)
    return [RunReport(run, by_run[run.id], rated.get(run.id, [])) for run in runs]


def describe(entry: RunLogEntry, preview_chars: int | None = 160) -> str:
    """One readable line for an entry; tool input and output shortened to `preview_chars`
    (None: as stored)."""
    data = entry.data
    if entry.kind == MODEL_CALL:
        return _describe_model_call(data)
    if entry.kind == TOOL_CALL:
        flag = " · ERROR" if data.get("is_error") else ""
        return (
            f"{data.get('name')}{flag} · {data.get('duration_ms', 0)} ms · "
            f"input {_preview(data.get('input', ''), preview_chars)} · "
            f"output {_preview(data.get('output', ''), preview_chars)}"
        )
    if entry.kind == FRAMES:
        counts = data.get("counts", {})
        return ", ".join(f"{kind} ×{n}" for kind, n in counts.items()) or "none"
    if entry.kind == ERROR:
        return f"{data.get('code')}: {data.get('message')}"
    if entry.kind == MODEL_ERROR:
        status = f"HTTP {data['status']} · " if data.get("status") is not None else ""
        return f"{status}{data.get('code')}: {_preview(data.get('message') or '', None)}"
    return json.dumps(data, ensure_ascii=False, default=str)


def _describe_model_call(data: dict[str, Any]) -> str:
    usage = data.get("usage") or {}
    request = (
        f"{_plural(data.get('messages') or 0, 'message')}, {_plural(data.get('tools') or 0, 'tool')}, "
        f"tool_choice {data.get('tool_choice')}, ~{data.get('estimated_input_tokens') or 0:,} "
        "tokens estimated"
    )
    if data.get("thinking"):
        request += f", thinking {data['thinking']:,}"
    parts = [str(data.get("model")), request]
    if "error" in data:
        status = f" (HTTP {data['error_status']})" if data.get("error_status") is not None else ""
        parts.append(f"ERROR {_preview(data['error'], None)}{status}")
    else:
        tokens = (
            f"in {usage.get('input_tokens', 0):,} / out {usage.get('output_tokens', 0):,} tokens"
        )
        cached = usage.get("cache_read_input_tokens")
        if cached:
            tokens += f" ({cached:,} cached)"
        parts += [tokens, f"stop {data.get('stop_reason')}"]
    parts.append(f"{data.get('duration_ms', 0):,} ms")
    return " · ".join(parts)


def _preview(text: str, limit: int | None) -> str:
    text = " ".join(text.split())
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + "…"


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _seconds(value: float) -> str:
    return f"{value:.3f}s" if value < 60 else f"{value / 60:.0f}m{value % 60:04.1f}s"


def _timestamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")
