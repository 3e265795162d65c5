"""Search across one person's chats: ranked, with snippets, never hidden rows or other
people's, and in step with every write (on SQLite and PostgreSQL alike)."""

from __future__ import annotations

from sqlalchemy import text

from app.chat.conversations import create_conversation, rename_conversation
from app.chat.models import Conversation, Message
from app.chat.rows import insert_message
from app.chat.search import index_row, search, search_terms


def _chat(session, user_id, title=None, rows=()):
    conversation = create_conversation(session, user_id, title)
    for kind, content, *meta in rows:
        insert_message(
            session,
            conversation.id,
            role="user" if kind == "user" else "assistant",
            kind=kind,
            content=content,
            meta=meta[0] if meta else None,
        )
    session.commit()
    return conversation.id


def _found(session, user_id, query):
    return [(hit.conversation_id, hit.sequence) for hit in search(session, user_id, query).hits]


def test_a_hit_names_its_chat_and_row_and_marks_the_words(app, auth, db):
    ada = auth.create()
    chat = _chat(
        db,
        ada,
        rows=[
            ("user", "Draft the spring newsletter for the bakery"),
            ("host", "Here is a **newsletter** draft: fresh croissants every morning."),
        ],
    )
    hits = search(db, ada, "croissants").hits
    assert [(h.conversation_id, h.sequence, h.kind) for h in hits] == [(chat, 2, "host")]
    snippet, marks = hits[0].snippet, hits[0].highlights
    assert "croissants" in snippet
    assert [snippet[start:end].lower() for start, end in marks] == ["croissants"]
    assert "\ue000" not in snippet


def test_words_are_stemmed_and_the_last_one_may_be_unfinished(app, auth, db):
    ada = auth.create()
    chat = _chat(db, ada, rows=[("user", "We are launching the campaign on Monday")])
    assert _found(db, ada, "launch") == [(chat, 1)]
    assert _found(db, ada, "campaign mond") == [(chat, 1)]
    assert _found(db, ada, "campaign tuesday") == []


def test_the_row_with_more_of_the_words_ranks_first(app, auth, db):
    ada = auth.create()
    chat = _chat(
        db,
        ada,
        rows=[
            ("user", "pricing for the offer"),
            ("host", "Pricing pricing pricing: the offer's pricing page, pricing tiers."),
            ("user", "what about the logo"),
        ],
    )
    assert _found(db, ada, "pricing")[:2] == [(chat, 2), (chat, 1)]


def test_hidden_rows_and_other_peoples_chats_are_never_found(app, auth, db):
    ada, bo = auth.create(), auth.create("bo@example.com")
    _chat(db, bo, rows=[("user", "the secret flamingo plan")])
    _chat(
        db,
        ada,
        rows=[
            ("tool_result", "flamingo from a tool", {"hidden": True}),
            ("host", "flamingo in a tool turn", {"hidden": True}),
        ],
    )
    assert _found(db, ada, "flamingo") == []
    assert len(_found(db, bo, "flamingo")) == 1


def test_a_row_shown_later_becomes_findable_and_a_deleted_chat_is_gone(app, auth, db):
    ada = auth.create()
    chat = _chat(db, ada, rows=[("host", "Which palette do you like?", {"hidden": True})])
    assert _found(db, ada, "palette") == []
    row = db.query(Message).filter_by(conversation_id=chat).one()
    row.kind = "card"
    row.meta = {
        "card": {"title": "Pick a palette", "steps": [{"id": "p", "title": "Teal or coral"}]}
    }
    index_row(db, row)
    db.commit()
    assert _found(db, ada, "coral") == [(chat, 1)]

    db.delete(db.get(Conversation, chat))
    db.commit()
    assert _found(db, ada, "palette") == []
    left = db.execute(text("SELECT count(*) FROM message_search")).scalar()
    assert left == 0  # the index forgets the rows with them


def test_titles_match_first_and_a_renamed_chat_is_found_by_its_new_title(app, auth, db):
    ada = auth.create()
    chat = _chat(db, ada, "Autumn launch", rows=[("user", "autumn colours for the launch")])
    hits = search(db, ada, "autumn").hits
    assert [(h.conversation_id, h.sequence) for h in hits] == [(chat, None), (chat, 1)]
    rename_conversation(db.get(Conversation, chat), "Winter sale")
    db.commit()
    assert _found(db, ada, "winter") == [(chat, None)]
    assert (chat, None) not in _found(db, ada, "autumn")


def test_agent_outputs_are_found_by_their_fields(app, auth, db):
    ada = auth.create()
    output = {"agent": "copywriter", "title": "Hero copy", "content": {"headline": "Bake joy"}}
    chat = _chat(db, ada, rows=[("agent_output", "", {"agentOutput": output})])
    assert _found(db, ada, "bake joy") == [(chat, 1)]


def test_pages_follow_the_cursor_until_there_are_no_more(app, auth, db):
    ada = auth.create()
    _chat(db, ada, rows=[("user", f"note {n} about mangoes") for n in range(5)])
    first = search(db, ada, "mangoes", limit=2)
    second = search(db, ada, "mangoes", limit=2, offset=first.next_offset)
    third = search(db, ada, "mangoes", limit=2, offset=second.next_offset)
    seen = [h.sequence for page in (first, second, third) for h in page.hits]
    assert sorted(seen) == [1, 2, 3, 4, 5]
    assert third.next_offset is None


def test_operators_and_punctuation_are_words_not_syntax(app, auth, db):
    ada = auth.create()
    chat = _chat(db, ada, rows=[("user", 'C++ and "quotes" NEAR(x) OR 100%')])
    assert search_terms('"NEAR( OR* 100%') == ["near", "or", "100"]
    assert _found(db, ada, 'quotes" OR') == [(chat, 1)]
    assert _found(db, ada, "*") == []


def test_a_card_is_found_by_its_question_and_chosen_answer_never_by_its_data(app, auth, db):
    ada = auth.create()
    question = "Which offer should the ad copy be for?"
    card = {
        "kind": "questionnaire",
        "title": question,
        "submitLabel": "Use this offer",
        "resultKey": "offer",
        "status": "answered",
        "answer": {"offer": 12},
        "steps": [
            {
                "id": "offer",
                "title": question,
                "input": "single",
                "options": [
                    {"label": "Gelato Club", "value": 12, "thumbnail": "/workspace/assets/9"},
                    {"label": "Sorbet Box", "value": 13, "badge": "draft"},
                ],
            }
        ],
    }
    image = {"kind": "image", "assetId": 9, "title": "Spring poster", "url": "/workspace/assets/9"}
    chat = _chat(
        db,
        ada,
        rows=[("card", question, {"card": card}), ("agent_output", "", {"agentOutput": image})],
    )
    assert _found(db, ada, "gelato club") == [(chat, 1)]  # the answer chosen, by its label
    assert _found(db, ada, "poster") == [(chat, 2)]
    for internal in ("sorbet", "workspace assets", "draft", "12", "use this"):
        assert _found(db, ada, internal) == [], internal
    (hit,) = search(db, ada, "offer").hits
    assert hit.snippet.lower().count("which offer") == 1  # lead-in, title, question: once


def test_a_page_gathers_each_chats_hits_together(app, auth, db):
    ada = auth.create()
    first = _chat(db, ada, rows=[("user", "mango " * 6), ("user", "mango and " + "words " * 30)])
    second = _chat(db, ada, rows=[("user", "mango " * 5), ("user", "mango or " + "words " * 30)])
    page = search(db, ada, "mango")
    assert [(h.conversation_id, h.sequence) for h in page.hits] == [
        (first, 1),
        (first, 2),
        (second, 1),
        (second, 2),
    ]
    assert [(c.conversation_id, [h.sequence for h in c.rows]) for c in page.chats] == [
        (first, [1, 2]),
        (second, [1, 2]),
    ]


def test_a_word_in_many_rows_is_ranked_a_batch_of_the_newest_at_a_time(app, auth, db, monkeypatch):
    """Rows are ranked within batches of the newest matches (RANKED_BATCH, 200; 3 here):
    the newest batch comes first, best first, and paging reaches every row once."""
    monkeypatch.setattr("app.chat.search.RANKED_BATCH", 3)
    ada = auth.create()
    words = ["mango", "mango mango mango", "mango", "mango", "mango mango mango", "mango"]
    chat = _chat(db, ada, rows=[("user", f"Ripe {text_} today") for text_ in words])
    pages, offset = [], 0
    while offset is not None:
        page = search(db, ada, "mang", limit=2, offset=offset)
        pages.append([h.sequence for h in page.hits if h.conversation_id == chat])
        offset = page.next_offset
    seen = [sequence for page in pages for sequence in page]
    assert seen[:3] == [5, 6, 4]  # rows 4..6, the row saying it thrice first
    assert seen[3] == 2  # then rows 1..3, again the best first
    assert sorted(seen) == [1, 2, 3, 4, 5, 6]


def test_an_unfinished_word_in_other_alphabets_finds_its_row(app, auth, db):
    """The prefixes SQLite's index keeps are counted in letters, not bytes."""
    ada = auth.create()
    chat = _chat(
        db,
        ada,
        rows=[("user", "Приветствие для клиентов"), ("user", "Ο κατάλογος του φθινοπώρου")],
    )
    assert _found(db, ada, "привет") == [(chat, 1)]
    assert _found(db, ada, "κατάλ") == [(chat, 2)]
