"""What a message row keeps in its `meta` JSON column, kind by kind, and the shapes kept
there: a card, a run's steps, a shown output. TypedDicts, because they are stored as JSON
and sent on the wire as they are (the keys stay camelCase for that).

Just above the bottom layer: the tools and agents build cards and shown rows, and app.chat,
which keeps them, sits above those layers. A row's kind says which of these its meta is
(`META_OF_KIND`); a reader that does not look at the kind sees `RowMeta`, every key any
kind keeps, typed as that kind keeps it. tests/chat/test_row_meta.py checks both: each
key written in app/ is declared for its kind, and RowMeta agrees with the kinds."""

# No `from __future__ import annotations`: the TypedDicts read their annotations when they
# are made, so that `__required_keys__` and `__optional_keys__` tell NotRequired keys apart
# (tests/chat/test_row_meta.py checks rows against them).
from collections.abc import Mapping
from typing import Any, NotRequired, Required, TypedDict, cast

from app.kinds import CardStatus, RowKind

# An Anthropic content block (text, tool_use, tool_result), as the model reads it.
Block = dict[str, Any]


class AskedCard(TypedDict):
    """What a tool shows to ask the person: a questionnaire (app/tools/questionnaire.py)
    or a held call's confirmation (app/tools/results.py); the loop makes it a `Card`."""

    kind: str  # a CardKind
    title: NotRequired[str]
    steps: NotRequired[list[dict[str, Any]]]  # a questionnaire's questions (none: [])
    submitLabel: NotRequired[str]
    resultKey: NotRequired[str | None]  # answered {resultKey: value}; None: {"answers": ...}
    freeTextKey: NotRequired[str]
    # A confirmation: the held call's exact arguments, why it is held, and what it will
    # fetch or remember, shown as it will run.
    arguments: NotRequired[dict[str, Any]]
    reason: NotRequired[str]
    url: NotRequired[dict[str, str]]
    memory: NotRequired[list[dict[str, Any]]]
    # A question an MCP tool asked mid-call: what its call needs to go on once answered
    # (app/tools/mcp_questions.py): {arguments, requestState, fields}.
    resume: NotRequired[dict[str, Any]]
    # An outside tool's held call: the MCP server and its own name for the tool.
    server: NotRequired[str]
    serverTool: NotRequired[str]


class HeldDetails(TypedDict, total=False):
    """What a held call's card shows besides its arguments (a tool's `held_details`)."""

    memory: list[dict[str, Any]]
    server: str
    serverTool: str
    reason: str


class Card(AskedCard):
    """`meta["card"]` of a card row: what the tool showed, plus who asked and where it is."""

    tool: str
    toolUseId: str
    status: CardStatus
    answer: NotRequired[dict[str, Any]]
    executed: NotRequired[bool]  # a confirmation: whether the approved call ran


class Step(TypedDict):
    """One tool call of a run, as its steps summary shows it."""

    tool: str
    label: str
    ms: int
    ok: bool
    outputId: NotRequired[int]
    assetId: NotRequired[int]


class StepsSummary(TypedDict):
    """`meta["steps"]` of the run's first shown row (app/chat/steps.py)."""

    runId: int
    ms: int
    items: list[Step]


class AgentOutput(TypedDict):
    """`meta["agentOutput"]` of an agent_output row: an agent's or a build tool's saved
    Output (app/agents/outputs.py), or a made image (app/tools/images.py)."""

    title: str
    offerId: int | None
    kind: NotRequired[str]  # an OutputKind; a saved output has none
    # A saved Output: its id, the agent that wrote it, and what it says.
    outputId: NotRequired[int]
    agent: NotRequired[str]
    agentName: NotRequired[str]
    content: NotRequired[dict[str, Any]]
    # A made image: its asset and how it is shown.
    assetId: NotRequired[int]
    url: NotRequired[str]
    draft: NotRequired[bool]
    width: NotRequired[int]
    height: NotRequired[int]


# --- meta, kind by kind --------------------------------------------------------------


class UserMeta(TypedDict):
    """A person's message: what the model reads of it (with notes of its files)."""

    blocks: list[Block]
    tokens: NotRequired[int]  # the blocks' estimate, cached at insert (app/chat/rows.py)
    files: NotRequired[list[dict[str, Any]]]  # the attachments it went with, shown on it
    untrusted: NotRequired[list[dict[str, Any]]]  # what its text was written from


class HostMeta(TypedDict, total=False):
    """A model turn: its blocks (text and tool calls), hidden when it has no text. An empty
    answer keeps `{"hidden": False}` alone."""

    blocks: list[Block]
    tokens: int
    stop_reason: str | None
    hidden: bool
    stopped: bool  # Stop ended it; its text is what had streamed
    steps: StepsSummary  # the run's steps, on its first shown row
    # The provider's web searches of this turn: what they read (app/llm/web_search.py).
    untrusted: list[dict[str, Any]]


class CardMeta(HostMeta, total=False):
    """A model turn that asked the person (its host row became a card row)."""

    card: Required[Card]
    awaiting: str | None  # the tool_use id the card waits for; None once closed


class ToolResultMeta(TypedDict):
    """A tool's answer as the model reads it; never shown."""

    blocks: list[Block]
    hidden: bool
    tool: str
    tokens: NotRequired[int]
    untrusted: NotRequired[list[dict[str, Any]]]  # the untrusted content it carries


class AgentOutputMeta(TypedDict):
    agentOutput: AgentOutput
    steps: NotRequired[StepsSummary]


class ErrorMeta(TypedDict):
    code: str  # an ErrorCode's value, or "interrupted"
    steps: NotRequired[StepsSummary]


class NoticeMeta(TypedDict, total=False):
    """Stop before any text (`stopped`), or a compaction (the summary and how far it reaches)."""

    stopped: bool
    summary: str
    summarizedUpTo: int


class RowMeta(TypedDict, total=False):
    """Any row's meta, as a reader that does not look at its kind sees it: every key of
    the kinds above, typed as they keep it."""

    blocks: list[Block]
    tokens: int
    hidden: bool
    stop_reason: str | None
    stopped: bool
    steps: StepsSummary
    files: list[dict[str, Any]]
    untrusted: list[dict[str, Any]]
    tool: str
    card: Card
    awaiting: str | None
    agentOutput: AgentOutput
    code: str
    summary: str
    summarizedUpTo: int


META_OF_KIND: Mapping[RowKind, type[Mapping[str, object]]] = {
    RowKind.USER: UserMeta,
    RowKind.HOST: HostMeta,
    RowKind.TOOL_RESULT: ToolResultMeta,
    RowKind.CARD: CardMeta,
    RowKind.AGENT_OUTPUT: AgentOutputMeta,
    RowKind.ERROR: ErrorMeta,
    RowKind.NOTICE: NoticeMeta,
}


class ShownRow(TypedDict):
    """A row a tool wants shown besides its hidden result (`ToolResult.visible_rows`):
    an agent's saved output or a made image."""

    kind: RowKind
    content: str
    meta: AgentOutputMeta


# --- reading them --------------------------------------------------------------------


def card_in(meta: Mapping[str, Any] | None) -> Card | None:
    """The card a row's meta keeps, or None. (A row's dict, app/chat/conversations.py's
    `row_dict`, carries its card, output and steps under the same keys.)"""
    card = (meta or {}).get("card")
    return cast(Card, card) if isinstance(card, dict) else None


def output_in(meta: Mapping[str, Any] | None) -> AgentOutput | None:
    """The output an agent_output row shows, or None."""
    output = (meta or {}).get("agentOutput")
    return cast(AgentOutput, output) if isinstance(output, dict) else None
