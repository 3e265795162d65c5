"""A conversation as a tree of rows (regenerate and edit keep the old versions beside the
new ones, as LibreChat, Open WebUI and ChatGPT do), of which one branch is shown.

Every row stores the row it follows (`Message.parent_sequence`, set by the one insert
path, `app.chat.rows.insert_message`). Which branch is shown is stored on the
conversation, without an UPDATE per inserted row: `branch_leaf_sequence` is the shown
leaf as it was chosen, `branch_chosen_at_sequence` the conversation's last sequence at
that moment. Rows written since continue the branch, so the leaf now is the last row when
there is one newer than that moment, else the leaf chosen (`leaf_of`). A conversation
never branched has both NULL and reads as one straight line.

Alternatives are the rows that follow the same row. What a person sees of one is its
head: its first visible row along its newest path (a regenerated answer may open with a
hidden tool call). That head carries the pager: `siblings` are the heads of all the
alternatives at that point, in order, itself included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, bindparam, case, func, literal, select
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import BindParameter

from app.chat.conversations import row_dict
from app.chat.feedback import with_feedback
from app.chat.models import Conversation, Message
from app.kinds import RowKind

NEVER_BRANCHED = "0"


def last_sequence(session: Session, conversation_id: int) -> int:
    return (
        session.scalar(
            select(func.max(Message.sequence)).where(Message.conversation_id == conversation_id)
        )
        or 0
    )


def leaf_of(conversation: Conversation, last: int) -> int | None:
    """The shown branch's leaf, given the conversation's last sequence (the same rule as
    the insert's parent in app/chat/rows.py)."""
    chosen_at = conversation.branch_chosen_at_sequence
    if chosen_at is not None and last <= chosen_at:
        return conversation.branch_leaf_sequence
    return last or None


def current_leaf(session: Session, conversation: Conversation) -> int | None:
    return leaf_of(conversation, last_sequence(session, conversation.id))


def branch_version(conversation: Conversation) -> str:
    """Names the shown branch's choice: it changes whenever another branch is chosen (a
    socket that reconnects with an older one gets the whole branch again)."""
    if conversation.branch_chosen_at_sequence is None:
        return NEVER_BRANCHED
    return f"{conversation.branch_chosen_at_sequence}-{conversation.branch_leaf_sequence or 0}"


# The newest rows of a conversation that never branched (the history a model call reads).
_NEWEST_ROWS = (
    select(Message)
    .where(
        Message.conversation_id == bindparam("conversation_id"),
        Message.sequence > bindparam("above"),
    )
    .order_by(Message.sequence.desc())
    .limit(bindparam("limit"))
)


def _newest_branch_rows() -> Select[Message]:
    """The newest rows of a branched conversation's shown branch, oldest first: its path
    walked up from the leaf (`leaf_of`'s rule, in SQL: no read of the last sequence first)
    by a recursive query at most `limit` rows deep. Built once: every model call of a
    branched conversation reads it, and composing it cost more than running it."""
    conversation_id: BindParameter[int] = bindparam("conversation_id")
    last = (
        select(func.max(Message.sequence))
        .where(Message.conversation_id == conversation_id)
        .scalar_subquery()
    )
    leaf = case(
        (last <= bindparam("chosen_at", type_=Integer), bindparam("chosen", type_=Integer)),
        else_=last,
    )
    path = (
        select(
            Message.sequence.label("seq"),
            Message.parent_sequence.label("parent"),
            literal(1, Integer).label("depth"),
        )
        .where(
            Message.conversation_id == conversation_id,
            Message.sequence == leaf,
            Message.sequence > bindparam("above"),
        )
        .cte("shown_path", recursive=True)
    )
    up = aliased(Message)
    path = path.union_all(
        select(up.sequence, up.parent_sequence, path.c.depth + 1).where(
            up.conversation_id == conversation_id,
            up.sequence == path.c.parent,
            up.sequence > bindparam("above"),
            path.c.depth < bindparam("limit"),
        )
    )
    # IN (the path) alone, not a join nor a range as well: each row is then looked up by
    # the unique index (with `sequence > above` here too, SQLite walks every row above).
    return (
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.sequence.in_(select(path.c.seq)))
        .order_by(Message.sequence)
    )


_NEWEST_BRANCH_ROWS = _newest_branch_rows()


def branch_rows(
    session: Session,
    conversation: Conversation,
    *,
    above: int = 0,
    below: int | None = None,
    limit: int | None = None,
) -> list[Message]:
    """The shown branch's rows with a sequence above `above` (and below `below`), oldest
    first; with `limit`, only the newest that many (hidden rows included). A branched
    conversation is walked up from its leaf by a recursive query; a straight one is read
    by sequence as before."""
    if below is None and limit is not None:
        # Every model call reads this: the statements are built once.
        values: dict[str, int | None] = {
            "conversation_id": conversation.id,
            "above": above,
            "limit": limit,
        }
        if conversation.branch_chosen_at_sequence is None:
            return list(reversed(session.scalars(_NEWEST_ROWS, values).all()))
        values["chosen_at"] = conversation.branch_chosen_at_sequence
        values["chosen"] = conversation.branch_leaf_sequence
        return list(session.scalars(_NEWEST_BRANCH_ROWS, values).all())
    where = [Message.conversation_id == conversation.id, Message.sequence > above]
    if below is not None:
        where.append(Message.sequence < below)
    if conversation.branch_chosen_at_sequence is None:
        query = select(Message).where(*where)
        if limit is None:
            return list(session.scalars(query.order_by(Message.sequence)))
        newest = session.scalars(query.order_by(Message.sequence.desc()).limit(limit)).all()
        return list(reversed(newest))
    leaf = current_leaf(session, conversation)
    if leaf is None or leaf <= above:
        return []
    path = (
        select(
            Message.sequence.label("seq"),
            Message.parent_sequence.label("parent"),
            literal(1).label("depth"),
        )
        .where(Message.conversation_id == conversation.id, Message.sequence == leaf)
        .cte("branch_path", recursive=True)
    )
    up = aliased(Message)
    step = select(up.sequence, up.parent_sequence, path.c.depth + 1).where(
        up.conversation_id == conversation.id,
        up.sequence == path.c.parent,
        up.sequence > above,
    )
    path = path.union_all(step)
    # IN (the path), not a join: each row is then looked up by the unique index.
    query = (
        select(Message)
        .where(*where, Message.sequence.in_(select(path.c.seq)))
        .order_by(Message.sequence)
    )
    rows = list(session.scalars(query))
    return rows[-limit:] if limit is not None else rows


@dataclass
class Tree:
    """Every row of one conversation, with who follows whom."""

    rows: dict[int, Message]
    children: dict[int | None, list[int]] = field(default_factory=dict)
    _newest: dict[int, int] | None = None

    @classmethod
    def load(cls, session: Session, conversation_id: int) -> Tree:
        rows = session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence)
        ).all()
        tree = cls({row.sequence: row for row in rows})
        for row in rows:
            tree.children.setdefault(row.parent_sequence, []).append(row.sequence)
        return tree

    def path(self, leaf: int | None) -> list[Message]:
        """The rows from the first to `leaf`, in order."""
        found: list[Message] = []
        sequence = leaf
        while sequence is not None and sequence in self.rows:
            row = self.rows[sequence]
            found.append(row)
            if row.parent_sequence is not None and row.parent_sequence >= sequence:
                break  # never expected: a parent is always older
            sequence = row.parent_sequence
        return list(reversed(found))

    def on_path(self, sequence: int, leaf: int | None) -> bool:
        return any(row.sequence == sequence for row in self.path(leaf))

    def newest_descendant(self, sequence: int) -> int:
        """The newest row at or under `sequence`: the leaf of its most recent branch (a
        row's children are always newer than the row)."""
        if self._newest is None:
            newest: dict[int, int] = {}
            for seq in sorted(self.rows, reverse=True):
                newest[seq] = max([seq, *(newest[c] for c in self.children.get(seq, []))])
            self._newest = newest
        return self._newest.get(sequence, sequence)

    def head(self, sequence: int) -> Message | None:
        """The first visible row of the alternative that starts at `sequence`, along its
        newest path; None when nothing of it is visible."""
        for row in self.path(self.newest_descendant(sequence)):
            if row.sequence >= sequence and not row.hidden:
                return row
        return None

    def nearest_user_row(self, sequence: int) -> Message | None:
        """The person's message a row answers: the nearest typed message above it."""
        for row in reversed(self.path(sequence)):
            if row.kind == RowKind.USER and row.role == "user" and row.sequence != sequence:
                return row
        return None

    def view(self, leaf: int | None, after: int = 0) -> list[dict[str, Any]]:
        """The shown branch's visible rows above `after` as row dicts, each head of an
        alternative with the heads of its siblings."""
        shown: list[dict[str, Any]] = []
        fork: tuple[int | None, int] | None = None  # (the row followed, the child shown)
        for row in self.path(leaf):
            alternatives = self.children.get(row.parent_sequence, [])
            if len(alternatives) > 1:
                fork = (row.parent_sequence, row.sequence)
            if row.hidden:
                continue
            siblings = None
            if fork is not None:
                parent, chosen = fork
                siblings = []
                for child in self.children.get(parent, []):
                    head = row if child == chosen else self.head(child)
                    if head is not None:
                        siblings.append(head.sequence)
                fork = None
            if row.sequence > after:
                shown.append(row_dict(row, siblings))
        return shown


def shown_rows(
    session: Session, conversation: Conversation, after: int = 0
) -> list[dict[str, Any]]:
    """The row dicts a page or a client shows: the shown branch's visible rows above
    `after`, in order."""
    if conversation.branch_chosen_at_sequence is None:
        rows = branch_rows(session, conversation, above=after)
        shown = [row_dict(row) for row in rows if not row.hidden]
    else:
        shown = Tree.load(session, conversation.id).view(current_leaf(session, conversation), after)
    return with_feedback(session, conversation, shown)  # the person's thumbs on answers


def show_branch(session: Session, conversation: Conversation, tree: Tree, leaf: int | None) -> None:
    """Make the branch ending at `leaf` the shown one (the conversation is locked by the
    caller, and what waited on the branch left was closed first). A summary that covers
    rows the new branch does not have is dropped: the model's history never mixes
    branches (compaction summarizes the new branch again when it grows too long)."""
    conversation.branch_leaf_sequence = leaf
    conversation.branch_chosen_at_sequence = last_sequence(session, conversation.id)
    covered = conversation.summarized_up_to_sequence
    if covered and (leaf is None or not tree.on_path(covered, leaf)):
        conversation.summary = None
        conversation.summarized_up_to_sequence = 0
    conversation.touch()


def restore_unanswered_fork(session: Session, conversation_id: int) -> bool:
    """After a run: a regenerate stopped before it wrote anything leaves the shown branch
    ending at the person's message, its older answers out of sight; show the newest of
    them again. True when it did (the caller commits)."""
    conversation = session.scalar(
        select(Conversation).where(Conversation.id == conversation_id).with_for_update()
    )
    if conversation is None or conversation.branch_chosen_at_sequence is None:
        return False
    if conversation.active_run_id is not None:
        return False
    leaf = current_leaf(session, conversation)
    if leaf is None or leaf != conversation.branch_leaf_sequence:
        return False  # rows were written since the branch was chosen
    has_children = session.scalar(
        select(Message.id)
        .where(Message.conversation_id == conversation_id, Message.parent_sequence == leaf)
        .limit(1)
    )
    if has_children is None:
        return False
    tree = Tree.load(session, conversation_id)
    show_branch(session, conversation, tree, tree.newest_descendant(leaf))
    return True
