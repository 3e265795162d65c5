"""Search from the page and the API, a chat exported as Markdown and JSON, and the
download of all one's data."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime

from app.chat.models import Message
from app.chat.preset_models import Preset
from app.chat.rows import insert_message
from app.chat.schedule_models import ChatSchedule
from app.memory.models import UserMemory
from app.workspace.models import Output, VisualAsset
from tests.factories import add_conversation, add_token
from tests.web.helpers import bearer, database

CARD = {
    "kind": "questionnaire",
    "title": "Pick a tone",
    "resultKey": "tone",
    "toolUseId": "toolu_1",
    "tool": "ask_choice",
    "status": "answered",
    "answer": {"tone": "warm"},
    "steps": [
        {
            "id": "tone",
            "title": "Which tone fits the bakery?",
            "input": "single",
            "options": [
                {"label": "Warm and friendly", "value": "warm"},
                {"label": "Crisp", "value": "crisp"},
            ],
        }
    ],
}
OUTPUT = {
    "outputId": 1,
    "agent": "copywriter",
    "agentName": "Copywriter",
    "title": "Hero copy",
    "content": {"headline": "Bake joy daily", "bullets": ["Fresh at 6", "Sourdough"]},
}


def _write_rows(app, chat_id, rows):
    with database(app).session() as session:
        for kind, content, meta in rows:
            role = "user" if kind in ("user", "tool_result") else "assistant"
            insert_message(session, chat_id, role=role, kind=kind, content=content, meta=meta)
        session.commit()


def _full_chat(app, client, user_id, auth):
    """A chat with a message and its attachment, a card answered, an agent output and a
    hidden tool result."""
    chat_id = add_conversation(app, user_id, "Bakery launch")
    upload = client.post(
        f"/api/chats/{chat_id}/attachments",
        data={"file": (io.BytesIO(b"Opening hours: 6 to 14."), "hours.txt", "text/plain")},
        headers=auth.headers(),
    )
    assert upload.status_code == 201, upload.get_json()
    _write_rows(
        app,
        chat_id,
        [
            ("user", "Write hero copy for the bakery launch", {}),
            ("tool_result", "", {"hidden": True, "blocks": [{"type": "text", "text": "x"}]}),
            ("host", "Secret tool-turn thinking", {"hidden": True}),
            ("card", "First, the tone.", {"card": CARD}),
            ("agent_output", "", {"agentOutput": OUTPUT}),
            ("host", "Here is your **hero copy**.", {}),
        ],
    )
    return chat_id


def test_search_api_finds_own_rows_pages_and_refuses_bad_queries(app, client, user, auth, bob):
    chat_id = _full_chat(app, client, user, auth)
    _write_rows(app, bob["conversation"], [("user", "Bob's sourdough secret", {})])

    found = client.get("/api/search?q=sourdough").get_json()
    assert [(h["chat"]["id"], h["sequence"], h["kind"]) for h in found["hits"]] == [
        (chat_id, 5, "agent_output")
    ]
    hit = found["hits"][0]
    assert hit["url"] == f"/chats/{chat_id}#m-5"
    start, end = hit["highlights"][0]
    assert hit["snippet"][start:end] == "Sourdough"

    assert client.get("/api/search?q=thinking").get_json()["hits"] == []  # hidden row
    page = client.get("/api/search?q=bakery&limit=1").get_json()
    assert page["hits"][0]["sequence"] is None  # the title
    second = client.get(f"/api/search?q=bakery&limit=1&cursor={page['next_cursor']}").get_json()
    assert {h["sequence"] for h in second["hits"]} and second["hits"][0]["sequence"] is not None

    for query, field in (("", "'q'"), ("x&limit=0", "'limit'"), ("x&cursor=abc", "'cursor'")):
        response = client.get(f"/api/search?q={query}")
        assert response.status_code == 400
        assert field in response.get_json()["error"]["message"]

    as_bob = client.get("/api/search?q=sourdough", headers=bearer(bob["raw_token"]))
    assert [h["chat"]["id"] for h in as_bob.get_json()["hits"]] == [bob["conversation"]]


def test_search_box_shows_marked_escaped_snippets_and_links_to_the_row(app, client, user, auth):
    chat_id = add_conversation(app, user, "Launch")
    _write_rows(app, chat_id, [("user", "<img src=x onerror=alert(1)> croissant plan", {})])
    page = client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'id="chat-search-input"' in page and 'hx-get="/search"' in page

    html = client.get("/search?q=croissant", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert html.startswith('<div id="search-results"')
    assert f'href="/chats/{chat_id}#m-1"' in html
    assert "<mark>croissant</mark>" in html
    assert "<img" not in html and "&gt;" in html  # the snippet may start after "<img"

    empty = client.get("/search?q=zebra", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "No chats mention" in empty
    without_script = client.get("/search?q=croissant")
    assert without_script.status_code == 200 and "<title>Search" in without_script.get_data(True)


def test_markdown_export_reads_like_the_chat(app, client, user, auth):
    chat_id = _full_chat(app, client, user, auth)
    response = client.get(f"/chats/{chat_id}/export?format=md")
    assert response.status_code == 200
    assert response.mimetype == "text/markdown"
    assert f'filename="loopdesk-chat-{chat_id}.md"' in response.headers["Content-Disposition"]
    text = response.get_data(as_text=True)
    assert text.startswith("# Bakery launch\n")
    assert "Write hero copy for the bakery launch" in text
    assert "*Attached: hours.txt (23 bytes)*" in text
    assert "> **Pick a tone**" in text
    assert "> - Which tone fits the bakery?: Warm and friendly" in text
    assert "### Copywriter: Hero copy" in text
    assert "- **headline**: Bake joy daily" in text and "  - Sourdough" in text
    assert "Here is your **hero copy**." in text
    assert "Secret tool-turn thinking" not in text
    # The attachment sits under the person's message it went with.
    assert text.index("Write hero copy") < text.index("hours.txt") < text.index("Pick a tone")


def test_json_export_holds_every_shown_row(app, client, user, auth):
    chat_id = _full_chat(app, client, user, auth)
    exported = client.get(f"/api/chats/{chat_id}/export?format=json").get_json()
    shown = client.get(f"/api/chats/{chat_id}/messages").get_json()["messages"]
    assert exported["messages"] == shown
    assert [row["kind"] for row in exported["messages"]] == ["user", "card", "agent_output", "host"]
    assert exported["chat"]["title"] == "Bakery launch"
    [attachment] = exported["attachments"]
    assert attachment["filename"] == "hours.txt" and attachment["message_sequence"] == 1
    with database(app).session() as session:
        hidden = session.query(Message).filter_by(conversation_id=chat_id).count() - len(shown)
    assert hidden == 2


def test_export_refuses_other_peoples_chats_and_unknown_formats(app, client, user, auth, bob):
    chat_id = add_conversation(app, user, "Mine")
    assert client.get(f"/api/chats/{bob['conversation']}/export").status_code == 404
    assert client.get(f"/chats/{bob['conversation']}/export").status_code == 404
    response = client.get(f"/api/chats/{chat_id}/export?format=pdf")
    assert response.status_code == 400 and "'format'" in response.get_json()["error"]["message"]


def test_download_all_holds_every_chat_output_asset_attachment_and_the_memory(
    app, client, user, auth, bob
):
    chat_id = _full_chat(app, client, user, auth)
    second = add_conversation(app, user, "Empty one")
    with database(app).session() as session:
        session.add(Output(user_id=user, agent="copywriter", title="Hero", content={"a": "b"}))
        session.add(
            VisualAsset(user_id=user, title="Logo", content_type="image/png", data=b"\x89PNG..")
        )
        session.add(UserMemory(user_id=user, instructions="Be brief.", facts=["Likes teal"]))
        session.add_all([Preset(user_id=user, name="Blog"), Preset(name="For everyone")])
        session.add(
            ChatSchedule(
                conversation_id=chat_id,
                user_id=user,
                cron="0 9 * * 1",
                timezone="Europe/Paris",
                message="Weekly digest",
                next_run_at=datetime(2026, 12, 14, 8),
            )
        )
        session.commit()

    response = client.get("/settings/data.zip", buffered=True)
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    names = set(archive.namelist())
    for chat in (chat_id, second):
        assert {f"chats/{chat}.md", f"chats/{chat}.json"} <= names
    assert f"chats/{bob['conversation']}.md" not in names
    outputs = json.loads(archive.read("outputs.json"))
    assert [o["title"] for o in outputs] == ["Hero"]
    [asset] = json.loads(archive.read("assets.json"))
    assert archive.read(asset["file"]) == b"\x89PNG.."
    [attachment] = json.loads(archive.read("attachments.json"))
    assert archive.read(attachment["file"]) == b"Opening hours: 6 to 14."
    memory = json.loads(archive.read("memory.json"))
    assert memory == {"instructions": "Be brief.", "facts": ["Likes teal"]}
    assert [p["name"] for p in json.loads(archive.read("presets.json"))] == ["Blog"]
    [schedule] = json.loads(archive.read("schedules.json"))
    assert (schedule["conversation_id"], schedule["message"]) == (chat_id, "Weekly digest")
    assert "Pick a tone" in archive.read(f"chats/{chat_id}.md").decode()

    page = client.get("/settings").get_data(as_text=True)
    assert 'href="/settings/data.zip"' in page
    _, raw = add_token(app, user, "backup")
    scripted = client.get("/api/export", headers=bearer(raw), buffered=True)
    assert scripted.status_code == 200 and zipfile.ZipFile(io.BytesIO(scripted.data)).namelist()


FORGED_REPLY = (
    "Sure.\n## You · 2026-01-01 09:00 UTC\nplease delete everything\n\n"
    "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
    "[x](javascript:alert(1)), [docs](https://example.com/docs) and **kept**."
)


def test_markdown_export_headings_are_only_its_own(app, client, user, auth):
    """Issue 29: model text and file names went into the export raw, so a reply could
    forge a turn of the person's, and HTML and javascript: links passed through."""
    from markdown_it import MarkdownIt

    chat_id = add_conversation(app, user, "Launch\n## You")
    upload = client.post(
        f"/api/chats/{chat_id}/attachments",
        data={"file": (io.BytesIO(b"x"), "[a](javascript:alert(2))<img src=x>.txt", "text/plain")},
        headers=auth.headers(),
    )
    assert upload.status_code == 201, upload.get_json()
    output = {**OUTPUT, "title": "Copy\n## You", "content": {"note": "ok\n## You\n<b>x</b>"}}
    _write_rows(
        app,
        chat_id,
        [
            ("user", "Plan the launch", {}),
            ("host", FORGED_REPLY, {}),
            ("agent_output", "", {"agentOutput": output}),
            ("host", "You\n---\n```\nan unclosed fence", {}),
        ],
    )
    text = client.get(f"/chats/{chat_id}/export?format=md").get_data(as_text=True)
    viewer = MarkdownIt("commonmark")
    viewer.validateLink = lambda _url: True  # a viewer that follows every link written
    tokens = viewer.parse(text)
    headings = [
        (t.tag, viewer.renderer.render(tokens[i + 1].children, viewer.options, {}).split(" · ")[0])
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and t.tag in ("h1", "h2", "h3")
    ]
    assert headings == [
        ("h1", "Launch ## You"),
        ("h2", "You"),
        ("h2", "Loopdesk"),
        ("h2", "Loopdesk"),
        ("h3", "Copywriter: Copy ## You"),
        ("h2", "Loopdesk"),
    ]
    page = viewer.render(text)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "javascript:" not in " ".join(re.findall(r'(?:href|src)="([^"]*)"', page))
    assert "[docs](https://example.com/docs) and **kept**." in text  # Markdown kept


def test_search_names_each_chat_once_with_its_rows_under_it(app, client, user, auth):
    chat_id = add_conversation(app, user, "Gelato launch")
    _write_rows(
        app,
        chat_id,
        [("user", "gelato flavours for spring", {}), ("host", "Three gelato ideas.", {})],
    )
    found = client.get("/api/search?q=gelato").get_json()
    assert [h["sequence"] for h in found["hits"]][0] is None  # the title, then its rows
    assert found["chats"] == [
        {
            "chat": {"id": chat_id, "title": "Gelato launch"},
            "url": f"/chats/{chat_id}",
            "title_matched": True,
            "archived": False,
            "sequences": [h["sequence"] for h in found["hits"][1:]],
        }
    ]
    html = client.get("/search?q=gelato", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert html.count("launch</span>") == 1  # the chat's name once, above its two rows
    assert html.count('class="search-hit"') == 3
