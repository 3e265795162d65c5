"""Shared guidelines every agent follows, appended with per-rule de-duplication.

The rules live in the database (admins edit them); prompts/shared-guidelines.md seeds
them once, on an empty database. Every change is recorded as a GuidelineChange in the
same transaction as the change itself. Nothing here commits: the caller does."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import exists, select, text
from sqlalchemy.orm import Session

from app.agents.models import RULE_MAX_CHARS, Guideline, GuidelineChange
from app.config import PROJECT_ROOT

GUIDELINES_FILE = PROJECT_ROOT / "prompts" / "shared-guidelines.md"
MAX_RULES = 50
# pg_advisory_xact_lock key that serialises seeding across processes on PostgreSQL.
_SEED_LOCK = 0x4C44_5347


@dataclass(frozen=True)
class Rule:
    id: str
    text: str


@dataclass(frozen=True)
class RuleInput:
    """One entry of a whole-list replacement: an existing rule (id) or a new one."""

    id: int | None
    text: str
    enabled: bool | None = None


class GuidelineError(ValueError):
    """A change that cannot be made; the message is fit to show."""


def _normalize(value: str) -> str:
    """Lower case words only: "em dashes - use" and "em dashes; use" read the same."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", value.lower()).split())


def clean_text(value: str) -> str:
    """A rule is one line: whitespace collapsed; empty or too long is an error."""
    cleaned = " ".join(value.split())
    if not cleaned:
        raise GuidelineError("A rule needs some text.")
    if len(cleaned) > RULE_MAX_CHARS:
        raise GuidelineError(f"A rule is at most {RULE_MAX_CHARS} characters.")
    return cleaned


def guidelines_from_file() -> list[Rule]:
    """`- [id] rule text` lines of prompts/shared-guidelines.md."""
    rules = []
    for line in GUIDELINES_FILE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^- \[([a-z0-9-]+)\]\s+(.+)$", line.strip())
        if match:
            rules.append(Rule(match.group(1), match.group(2).strip()))
    return rules


def append_guidelines(prompt: str, rules: list[Rule]) -> str:
    """The prompt plus every rule it does not already state, each exactly once."""
    stated = f" {_normalize(prompt)} "
    seen: set[str] = set()
    missing = []
    for rule in rules:
        key = _normalize(rule.text)
        if key and f" {key} " not in stated and key not in seen:
            seen.add(key)
            missing.append(rule.text)
    if not missing:
        return prompt
    lines = "\n".join(f"- {text}" for text in missing)
    return f"{prompt}\n\n## Shared guidelines\n{lines}"


# -- reading ------------------------------------------------------------------------------


def _ever_seeded(session: Session) -> bool:
    """Any rule or any recorded change means the rules were seeded once already (an admin
    who deleted every rule keeps an empty list)."""
    return bool(
        session.scalar(select(exists().where(Guideline.id.is_not(None))))
        or session.scalar(select(exists().where(GuidelineChange.id.is_not(None))))
    )


def ensure_seeded(session: Session) -> bool:
    """Seed the rules from prompts/shared-guidelines.md on a database that never had any,
    recorded as `seeded` changes. The one place seeding happens; returns whether it did.
    The caller commits."""
    if _ever_seeded(session):
        return False
    if session.get_bind().dialect.name == "postgresql":
        # Two processes reading the rules for the first time must not both seed. (SQLite
        # serialises writers already: every transaction there begins IMMEDIATE.)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SEED_LOCK})
        if _ever_seeded(session):
            return False
    for position, rule in enumerate(guidelines_from_file(), start=1):
        guideline = Guideline(position=position, text=clean_text(rule.text), enabled=True)
        session.add(guideline)
        session.flush()
        _record(session, "seeded", guideline, None, after=guideline.text)
    session.flush()
    return True


def ordered_guidelines(session: Session) -> list[Guideline]:
    """Every rule, enabled or not, in order (seeding first if need be)."""
    rows = list(session.scalars(select(Guideline).order_by(Guideline.position, Guideline.id)))
    if not rows and ensure_seeded(session):
        rows = list(session.scalars(select(Guideline).order_by(Guideline.position, Guideline.id)))
    return rows


def current_rules(session: Session) -> list[Rule]:
    """The enabled rules, in order, as they are in the database right now."""
    return [Rule(str(g.id), g.text) for g in ordered_guidelines(session) if g.enabled]


def recent_changes(session: Session, limit: int = 100) -> list[GuidelineChange]:
    query = (
        select(GuidelineChange)
        .order_by(GuidelineChange.created_at.desc(), GuidelineChange.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


# -- changing -----------------------------------------------------------------------------


def _record(
    session: Session,
    action: str,
    guideline: Guideline | None,
    user_id: int | None,
    before: str | None = None,
    after: str | None = None,
) -> None:
    session.add(
        GuidelineChange(
            guideline_id=guideline.id if guideline is not None else None,
            user_id=user_id,
            action=action,
            before=before,
            after=after,
        )
    )


def _renumber(rules: list[Guideline]) -> None:
    for position, rule in enumerate(rules, start=1):
        if rule.position != position:
            rule.position = position


def add_rule(session: Session, value: str, user_id: int | None) -> Guideline:
    rules = ordered_guidelines(session)
    if len(rules) >= MAX_RULES:
        raise GuidelineError(f"There can be at most {MAX_RULES} rules.")
    guideline = Guideline(position=len(rules) + 1, text=clean_text(value), enabled=True)
    session.add(guideline)
    session.flush()
    _record(session, "added", guideline, user_id, after=guideline.text)
    session.flush()
    return guideline


def edit_rule(session: Session, guideline: Guideline, value: str, user_id: int | None) -> bool:
    cleaned = clean_text(value)
    if cleaned == guideline.text:
        return False
    _record(session, "edited", guideline, user_id, before=guideline.text, after=cleaned)
    guideline.text = cleaned
    session.flush()
    return True


def set_enabled(session: Session, guideline: Guideline, enabled: bool, user_id: int | None) -> bool:
    if guideline.enabled == enabled:
        return False
    guideline.enabled = enabled
    _record(session, "enabled" if enabled else "disabled", guideline, user_id, after=guideline.text)
    session.flush()
    return True


def move_rule(session: Session, guideline: Guideline, offset: int, user_id: int | None) -> bool:
    """Swap the rule with its neighbour above (-1) or below (+1); False at either end."""
    rules = ordered_guidelines(session)
    index = next(i for i, rule in enumerate(rules) if rule.id == guideline.id)
    target = index + offset
    if not 0 <= target < len(rules):
        return False
    rules[index], rules[target] = rules[target], rules[index]
    _renumber(rules)
    _record(session, "moved", guideline, user_id, before=str(index + 1), after=str(target + 1))
    session.flush()
    return True


def delete_rule(session: Session, guideline: Guideline, user_id: int | None) -> None:
    rules = [rule for rule in ordered_guidelines(session) if rule.id != guideline.id]
    # The change keeps the text; its link to the rule would be set to NULL anyway.
    _record(session, "deleted", None, user_id, before=guideline.text)
    session.delete(guideline)
    _renumber(rules)
    session.flush()


def replace_rules(session: Session, items: list[RuleInput], user_id: int | None) -> list[Guideline]:
    """Make the list exactly `items`, in that order: ids given are kept (and edited),
    existing ids left out are deleted, entries without an id are new. Validates the
    whole list before changing anything; records one change per thing that changed. A
    kept rule is `moved` when its place among the kept rules changed (deleting or adding
    others moves nobody)."""
    rules = ordered_guidelines(session)
    by_id = {rule.id: rule for rule in rules}
    if len(items) > MAX_RULES:
        raise GuidelineError(f"There can be at most {MAX_RULES} rules.")
    seen: set[int] = set()
    cleaned = []
    for number, item in enumerate(items, start=1):
        if item.id is not None:
            if item.id not in by_id:
                raise GuidelineError(f"Rule {number}: there is no rule with id {item.id}.")
            if item.id in seen:
                raise GuidelineError(f"Rule {number}: id {item.id} appears more than once.")
            seen.add(item.id)
        try:
            cleaned.append(clean_text(item.text))
        except GuidelineError as error:
            raise GuidelineError(f"Rule {number}: {error}") from None

    old_rank = {rule.id: rank for rank, rule in enumerate(rules, start=1)}
    kept_before = [rule.id for rule in rules if rule.id in seen]
    kept_after = [item.id for item in items if item.id is not None]
    stays = {a for a, b in zip(kept_before, kept_after, strict=True) if a == b}

    for rule in rules:
        if rule.id not in seen:
            _record(session, "deleted", None, user_id, before=rule.text)
            session.delete(rule)
    result = []
    for position, (item, value) in enumerate(zip(items, cleaned, strict=True), start=1):
        if item.id is None:
            rule = Guideline(position=position, text=value, enabled=True)
            session.add(rule)
            session.flush()
            _record(session, "added", rule, user_id, after=value)
            if item.enabled is False:
                rule.enabled = False
                _record(session, "disabled", rule, user_id, after=value)
        else:
            rule = by_id[item.id]
            if rule.text != value:
                _record(session, "edited", rule, user_id, before=rule.text, after=value)
                rule.text = value
            if item.enabled is not None and item.enabled != rule.enabled:
                rule.enabled = item.enabled
                action = "enabled" if item.enabled else "disabled"
                _record(session, action, rule, user_id, after=value)
            if rule.id not in stays:
                before, after = str(old_rank[rule.id]), str(position)
                _record(session, "moved", rule, user_id, before=before, after=after)
            rule.position = position
        result.append(rule)
    session.flush()
    return result
