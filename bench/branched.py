"""A branched conversation for the turn-start benchmark, stored as the app stores one
(app/chat/branches.py): every row keeps the row it follows (`parent_sequence`), and the
conversation keeps the shown leaf as it was chosen with the last sequence at that moment.

The person edits a message every few exchanges and regenerates an answer now and then
(each leaves the older version beside the new one), and every quarter of the way explores
a long alternative before going back to the branch they left. The last of those
alternatives is near the end, inside the rows a turn reads, and the conversation ends on a
regenerate: the shown branch ends at the person's last message, with the answer being
replaced newer than it. So the rows a turn reads are neither the newest rows nor
contiguous: only the branch's path finds them.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Integer, literal, select

from app.models import Message

EDIT_EVERY = 7  # exchanges: the person rewrites the message just answered
REGENERATE_EVERY = 11  # exchanges: the person asks for another answer
DEEP_BRANCHES = 4  # long alternatives along the conversation, the last one near its end
DEEP_FRACTION = 0.05  # of the conversation, each long alternative's length
ENDING_ROWS = 90  # rows on the shown branch after the last long alternative
LAST_ANSWER_ROWS = 4  # the answer being regenerated when the turn starts

Exchange = Callable[[int], list[dict]]


class BranchWriter:
    """Appends rows the way `app.chat.rows.insert_message` does (each after the shown
    leaf) and moves the shown branch the way edit, regenerate and choose do."""

    def __init__(self, exchange: Exchange, total: int):
        self.exchange = exchange
        self.total = total
        self.rows: list[dict] = []
        self.leaf: int | None = None
        self.chosen: tuple[int | None, int | None] = (None, None)  # (leaf, chosen at)
        self.children: dict[int | None, list[int]] = {}
        self.number = 0

    @property
    def room(self) -> int:
        return self.total - len(self.rows)

    def insert(self, row: dict) -> int:
        sequence = len(self.rows) + 1
        self.rows.append({**row, "sequence": sequence, "parent_sequence": self.leaf})
        self.children.setdefault(self.leaf, []).append(sequence)
        self.leaf = sequence
        return sequence

    def show(self, leaf: int | None) -> None:
        self.leaf = leaf
        self.chosen = (leaf, len(self.rows))

    def write(self, rows: list[dict], reserve: int = 0) -> int | None:
        """Rows of one exchange while there is room; the first one's sequence."""
        first = None
        for row in rows:
            if self.room <= reserve:
                break
            sequence = self.insert(row)
            first = first or sequence
        return first

    def next_exchange(self) -> list[dict]:
        self.number += 1
        return self.exchange(self.number)

    def newest_descendant(self, sequence: int) -> int:
        newest, stack = sequence, [sequence]
        while stack:
            below = stack.pop()
            newest = max(newest, below)
            stack.extend(self.children.get(below, []))
        return newest

    def parent(self, sequence: int) -> int | None:
        return self.rows[sequence - 1]["parent_sequence"]

    def exchanges(self, count_rows: int, reserve: int = 0) -> None:
        """About `count_rows` rows of exchanges, with edits and regenerates along them."""
        goal = min(len(self.rows) + count_rows, self.total - reserve)
        while len(self.rows) < goal:
            asked = self.write(self.next_exchange(), reserve)
            if asked is None:
                return
            if self.number % EDIT_EVERY == 0 and self.room > reserve:
                self.show(self.parent(asked))  # the old version stays beside the new
                self.write(self.next_exchange(), reserve)
            elif self.number % REGENERATE_EVERY == 0 and self.room > reserve:
                user_row = self.leaf_user_row()
                self.show(user_row)
                self.write(self.next_exchange()[1:], reserve)

    def leaf_user_row(self) -> int | None:
        sequence = self.leaf
        while sequence is not None and self.rows[sequence - 1]["kind"] != "user":
            sequence = self.parent(sequence)
        return sequence

    def explore(self, length: int, reserve: int) -> None:
        """A long alternative from a message a few exchanges back, then back to the branch
        it left (choose: that branch's newest row)."""
        asked = self.leaf_user_row()
        for _ in range(3):
            if asked is None or self.parent(asked) is None:
                break
            above = self.parent(asked)
            asked = self.user_row_above(above) or asked
        if asked is None:
            return
        self.show(self.parent(asked))
        self.exchanges(length, reserve)
        self.show(self.newest_descendant(asked))

    def user_row_above(self, sequence: int | None) -> int | None:
        while sequence is not None and self.rows[sequence - 1]["kind"] != "user":
            sequence = self.parent(sequence)
        return sequence


def branched_rows(total: int, exchange: Exchange) -> tuple[list[dict], int | None, int | None]:
    """`total` rows in sequence order, each with its `parent_sequence`, and the
    conversation's (branch_leaf_sequence, branch_chosen_at_sequence)."""
    writer = BranchWriter(exchange, total)
    deep = int(total * DEEP_FRACTION)
    ending = min(ENDING_ROWS, total // 5)
    last = LAST_ANSWER_ROWS + 1
    stretch = max(1, (total - ending - last - DEEP_BRANCHES * deep) // DEEP_BRANCHES)
    for _ in range(DEEP_BRANCHES):
        writer.exchanges(stretch, reserve=ending + last + deep)
        writer.explore(deep, reserve=ending + last)
    writer.exchanges(total, reserve=last)
    # The last exchange: the person's message and an answer they asked to regenerate.
    asked = writer.insert(writer.next_exchange()[0])
    answer = writer.next_exchange()[1:] + writer.next_exchange()[1:]
    for row in answer[: total - len(writer.rows)]:
        writer.insert(row)
    writer.show(asked)
    leaf, chosen_at = writer.chosen
    return writer.rows, leaf, chosen_at


def floor_statement(conversation_id: int, leaf: int, after: int, limit: int):
    """One core SELECT (no ORM) of the branch's newest `limit` rows above `after`: the
    path walked up from the leaf, at most `limit` rows deep, by a recursive query; newest
    first, as the straight floor reads them."""
    table = Message.__table__
    path = (
        select(table.c.sequence.label("seq"), literal(1, Integer).label("depth"))
        .add_columns(table.c.parent_sequence.label("parent"))
        .where(
            table.c.conversation_id == conversation_id,
            table.c.sequence == leaf,
            table.c.sequence > after,
        )
        .cte("floor_path", recursive=True)
    )
    up = table.alias("up")
    path = path.union_all(
        select(up.c.sequence, path.c.depth + 1, up.c.parent_sequence).where(
            up.c.conversation_id == conversation_id,
            up.c.sequence == path.c.parent,
            up.c.sequence > after,
            path.c.depth < limit,
        )
    )
    # Each row of the path looked up by the unique index (a range as well would walk
    # the rows above `after`, every one of them on SQLite).
    return (
        select(table)
        .where(table.c.conversation_id == conversation_id, table.c.sequence.in_(select(path.c.seq)))
        .order_by(table.c.sequence.desc())
    )
