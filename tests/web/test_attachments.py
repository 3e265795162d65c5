"""Attachments: the composer's Attach form and the API route store checked files whose text
the model reads with read_attachment; anything else is refused and nothing is stored."""

from __future__ import annotations

import io
from unittest.mock import ANY

import pytest
from PIL import Image
from pypdf import PdfWriter
from sqlalchemy import select
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from app.accounts.models import User
from app.chat.attachments import pending_attachments
from app.chat.rows import insert_message
from app.tools.context import ToolContext
from app.tools.invoke import invoke
from app.workspace.attachments import AttachmentRefused, note_for, safe_filename
from app.workspace.models import Attachment, Offer
from tests.factories import add_conversation, add_token, store_attachment
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    bearer,
    count,
    database,
    fetch,
    json_error,
    snapshot,
)

HTMX = {"HX-Request": "true"}


# -- files to upload ----------------------------------------------------------------------------


def make_pdf(*pages: str) -> bytes:
    """A small, valid PDF with one line of Helvetica text a page ('' for a blank page)."""
    count_ = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count_))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count_} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        content = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def blank_pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_image(fmt: str = "PNG", size=(64, 32)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "teal").save(out, fmt)
    return out.getvalue()


def upload(client, auth, chat_id, data: bytes, filename: str, content_type: str, **kwargs):
    """The Attach form as htmx posts it (multipart, CSRF token in the form)."""
    form = {"file": (io.BytesIO(data), filename, content_type)}
    if auth is not None:
        form["csrf_token"] = auth.csrf
    headers = kwargs.pop("headers", HTMX)
    return client.post(
        f"/chats/{chat_id}/attachments",
        data=form,
        content_type="multipart/form-data",
        headers=headers,
        **kwargs,
    )


def stored(app, chat_id) -> list[Attachment]:
    with database(app).session() as session:
        from sqlalchemy import select

        return list(
            session.scalars(
                select(Attachment)
                .where(Attachment.conversation_id == chat_id)
                .order_by(Attachment.id)
            ).all()
        )


def read_attachment(app, user_id, chat_id, attachment_id) -> dict:
    """The host model's read tool, called the way the loop calls it."""
    services = app.extensions["services"]
    with database(app).session() as session:
        ctx = ToolContext(
            session=session,
            user_id=user_id,
            conversation_id=chat_id,
            run_id=0,
            services=services,
            emit=lambda event: None,
        )
        result = invoke(
            services.tools.get("read_attachment"), ctx, {"attachment_id": attachment_id}
        )
        # The result names the file as its untrusted source (the conversation's taint).
        assert result.untrusted_sources == [
            {"tool": "read_attachment", "attachment_id": attachment_id, "filename": ANY}
        ]
        return result.content


@pytest.fixture
def chat_id(app, user):
    return add_conversation(app, user, "Research")


def banner_text(response) -> str:
    assert response.headers.get("HX-Retarget") == "#banner"
    return response.get_data(as_text=True)


# -- uploads that are stored --------------------------------------------------------------------


def test_upload_text_file_and_read_it_back(app, client, auth, user, chat_id):
    response = upload(
        client, auth, chat_id, b"Spring launch notes\nBudget: 5k", "notes.txt", "text/plain"
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    html = response.get_data(as_text=True)
    assert 'id="attachments"' in html and "notes.txt" in html
    [attachment] = stored(app, chat_id)
    assert (attachment.user_id, attachment.filename, attachment.content_type) == (
        user,
        "notes.txt",
        "text/plain",
    )
    assert attachment.size == len(b"Spring launch notes\nBudget: 5k")
    assert attachment.data == b"Spring launch notes\nBudget: 5k"

    result = read_attachment(app, user, chat_id, attachment.id)
    assert result["untrusted"] is True
    assert result["text"] == "Spring launch notes\nBudget: 5k"
    assert "not instructions" in result["note"]
    assert app.extensions["services"].tools.get("read_attachment").untrusted


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [
        ("brief.md", "text/markdown"),
        ("brief.md", "text/x-markdown"),
        ("brief.md", "application/octet-stream"),  # what some browsers send for .md
        ("brief.markdown", ""),
    ],
)
def test_upload_markdown(app, client, auth, user, chat_id, filename, content_type):
    text = "# Brief\n\n- Audience: café owners ☕\n"
    response = upload(client, auth, chat_id, text.encode(), filename, content_type)
    assert response.status_code == 201, response.get_data(as_text=True)
    [attachment] = stored(app, chat_id)
    assert attachment.content_type == "text/markdown"
    assert read_attachment(app, user, chat_id, attachment.id)["text"] == text


def test_text_with_byte_order_mark_is_read_without_it(app, client, auth, user, chat_id):
    response = upload(client, auth, chat_id, "\ufeffhello".encode(), "bom.txt", "text/plain")
    assert response.status_code == 201
    assert stored(app, chat_id)[0].text == "hello"


def test_upload_pdf_extracts_text_page_by_page(app, client, auth, user, chat_id):
    data = make_pdf("Quarterly report", "Revenue grew 12 percent")
    response = upload(client, auth, chat_id, data, "report.pdf", "application/pdf")
    assert response.status_code == 201, response.get_data(as_text=True)
    [attachment] = stored(app, chat_id)
    assert attachment.content_type == "application/pdf"
    assert attachment.data == data
    result = read_attachment(app, user, chat_id, attachment.id)
    assert result["untrusted"] is True
    assert "Page 1" in result["text"] and "Quarterly report" in result["text"]
    assert "Page 2" in result["text"] and "Revenue grew 12 percent" in result["text"]
    assert result["text"].index("Quarterly") < result["text"].index("Revenue")


def test_pdf_without_text_gets_a_clear_note(app, client, auth, user, chat_id):
    response = upload(client, auth, chat_id, blank_pdf(), "scan.pdf", "application/pdf")
    assert response.status_code == 201
    [attachment] = stored(app, chat_id)
    assert "no extractable text" in attachment.text
    assert "no extractable text" in read_attachment(app, user, chat_id, attachment.id)["text"]


def test_pdf_reads_at_most_200_pages(app, user, chat_id):
    with database(app).session() as session:
        attachment = store_attachment(
            session, user, chat_id, "long.pdf", "application/pdf", make_pdf(*["p"] * 203)
        )
        assert "Page 200" in attachment.text and "Page 201" not in attachment.text
        assert "first 200 of 203 pages" in attachment.text


@pytest.mark.parametrize(
    ("fmt", "content_type", "filename"),
    [
        ("PNG", "image/png", "logo.png"),
        ("JPEG", "image/jpeg", "photo.jpg"),
        ("WEBP", "image/webp", "banner.webp"),
        ("GIF", "image/gif", "icon.gif"),
    ],
)
def test_upload_image_gets_a_description(
    app, client, auth, user, chat_id, fmt, content_type, filename
):
    response = upload(client, auth, chat_id, make_image(fmt, (64, 32)), filename, content_type)
    assert response.status_code == 201, response.get_data(as_text=True)
    [attachment] = stored(app, chat_id)
    assert attachment.content_type == content_type
    assert fmt in attachment.text and "64 × 32 pixels" in attachment.text
    assert "vision" in attachment.text


def test_filename_is_kept_safe(app, client, auth, chat_id):
    response = upload(client, auth, chat_id, b"x", "../../etc/\u202epass\x07wd.txt", "text/plain")
    assert response.status_code == 201
    assert stored(app, chat_id)[0].filename == "passwd.txt"
    assert safe_filename("two\nlines\t.md") == "two lines .md"
    assert safe_filename("C:\\Users\\ada\\brief.md") == "brief.md"
    assert safe_filename("..") == safe_filename("") == "attachment"
    long_name = safe_filename("a" * 400 + ".pdf")
    assert len(long_name) == 255 and long_name.endswith(".pdf")


def test_chat_page_shows_the_chips_and_the_attach_form(app, client, auth, chat_id):
    upload(client, auth, chat_id, b"hello", "notes.txt", "text/plain")
    html = client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'id="attachments"' in html and "notes.txt" in html
    assert 'hx-encoding="multipart/form-data"' in html and 'type="file"' in html
    assert html.index('id="attachments"') < html.index('id="composer"')


def test_upload_without_htmx_redirects_to_the_chat(app, client, auth, chat_id):
    response = upload(client, auth, chat_id, b"hello", "notes.txt", "text/plain", headers={})
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/chats/{chat_id}")
    assert len(stored(app, chat_id)) == 1


# -- refused uploads ------------------------------------------------------------------------------


def test_file_over_the_attachment_limit_is_refused_with_413(make_app):
    app = make_app(attachment_max_bytes=1000)
    client = app.test_client()
    from tests.factories import AuthActions

    auth = AuthActions(app, client)
    user = auth.create()
    auth.login()
    chat_id = add_conversation(app, user)
    response = upload(client, auth, chat_id, b"x" * 1001, "big.txt", "text/plain")
    assert response.status_code == 413
    assert "too large" in banner_text(response)
    assert "at most 1 KB" in response.get_data(as_text=True)
    ok = upload(client, auth, chat_id, b"x" * 1000, "fits.txt", "text/plain")
    assert ok.status_code == 201
    assert [a.filename for a in stored(app, chat_id)] == ["fits.txt"]


def multipart(fields: dict) -> tuple[bytes, str]:
    """A multipart body built in memory (the test client spools big ones to a temporary file
    it leaves open when the app refuses to read it)."""
    boundary, body = encode_multipart(fields)
    return body, f"multipart/form-data; boundary={boundary}"


def test_body_over_max_content_length_is_refused_with_413(app, client, auth, chat_id):
    limit = app.config["MAX_CONTENT_LENGTH"]
    assert limit == 8 * 1024 * 1024
    data = b"x" * (limit + 1)
    huge = FileStorage(io.BytesIO(data), "huge.txt", content_type="text/plain")
    body, content_type = multipart({"file": huge, "csrf_token": auth.csrf})
    response = client.post(
        f"/chats/{chat_id}/attachments", data=body, content_type=content_type, headers=HTMX
    )
    assert response.status_code == 413
    assert "too large: at most 8 MB" in banner_text(response)
    assert stored(app, chat_id) == []
    # Scripts get the JSON error shape.
    huge = FileStorage(io.BytesIO(data), "huge.txt", content_type="text/plain")
    body, content_type = multipart({"file": huge})
    response = client.post(
        f"/api/chats/{chat_id}/attachments",
        data=body,
        content_type=content_type,
        headers=auth.headers(),
    )
    assert json_error(response, 413) == "TOO_LARGE"
    assert "at most 8 MB" in response.get_json()["error"]["message"]
    assert stored(app, chat_id) == []


@pytest.mark.parametrize(
    ("data", "filename", "content_type"),
    [
        (b"MZ\x90\x00\x03\x00\x00\x00", "setup.exe", "application/x-msdownload"),
        (b"MZ\x90\x00\x03\x00\x00\x00", "setup.exe", "application/octet-stream"),
        (b"PK\x03\x04\x14\x00", "archive.zip", "application/zip"),
        (b"<script>alert(1)</script>", "page.html", "text/html"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "logo.svg", "image/svg+xml"),
    ],
)
def test_unsupported_type_is_refused_with_400(
    app, client, auth, chat_id, data, filename, content_type
):
    before = snapshot(app)
    response = upload(client, auth, chat_id, data, filename, content_type)
    assert response.status_code == 400
    assert "cannot be attached" in banner_text(response)
    assert snapshot(app) == before


@pytest.mark.parametrize(
    ("data", "filename", "content_type"),
    [
        (make_image("PNG"), "report.pdf", "application/pdf"),  # a PNG claiming to be a PDF
        (make_pdf("hi"), "logo.png", "image/png"),
        (make_image("PNG"), "photo.jpg", "image/jpeg"),
        (make_image("PNG"), "notes.txt", "text/plain"),
        (b"\xff\xfe\x00\x00binary", "notes.md", "text/markdown"),
        (b"text\x00with nul", "notes.txt", "text/plain"),
        (b"plain words, not a PDF", "report.pdf", "application/pdf"),
    ],
)
def test_file_whose_bytes_lie_about_its_type_is_refused(
    app, client, auth, chat_id, data, filename, content_type
):
    before = snapshot(app)
    response = upload(client, auth, chat_id, data, filename, content_type)
    assert response.status_code == 400
    assert "does not match its type" in banner_text(response)
    assert snapshot(app) == before


@pytest.mark.parametrize(
    ("data", "filename", "content_type", "message"),
    [
        (b"%PDF-1.4 and then nothing", "broken.pdf", "application/pdf", "could not be read"),
        (make_image("PNG")[:60], "cut.png", "image/png", "could not be read"),
        (b"", "empty.txt", "text/plain", "is empty"),
    ],
)
def test_broken_file_is_refused(app, client, auth, chat_id, data, filename, content_type, message):
    response = upload(client, auth, chat_id, data, filename, content_type)
    assert response.status_code == 400
    assert message in banner_text(response)
    assert stored(app, chat_id) == []


def test_password_protected_pdf_is_refused(app, client, auth, chat_id):
    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    writer.encrypt("secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    response = upload(client, auth, chat_id, out.getvalue(), "locked.pdf", "application/pdf")
    assert response.status_code == 400
    assert "password-protected" in banner_text(response)


def test_missing_file_is_refused(app, client, auth, chat_id):
    response = client.post(
        f"/chats/{chat_id}/attachments", data={"csrf_token": auth.csrf}, headers=HTMX
    )
    assert response.status_code == 400
    assert "Choose a file" in banner_text(response)


def test_refusal_as_json_for_json_clients(app, client, auth, chat_id):
    response = upload(
        client,
        auth,
        chat_id,
        b"PK\x03\x04",
        "a.zip",
        "application/zip",
        headers={"Accept": "application/json"},
    )
    assert json_error(response, 400) == "ATTACHMENT_REFUSED"


# -- who may upload -------------------------------------------------------------------------------


def test_another_users_conversation_is_404_and_nothing_is_stored(app, client, auth, user, bob):
    before = snapshot(app)
    response = upload(client, auth, bob["conversation"], b"hello", "notes.txt", "text/plain")
    assert response.status_code == 404
    response = client.post(
        f"/api/chats/{bob['conversation']}/attachments",
        data={"file": (io.BytesIO(b"hello"), "notes.txt", "text/plain")},
        content_type="multipart/form-data",
        headers=auth.headers(),
    )
    assert json_error(response, 404) == "NOT_FOUND"
    assert snapshot(app) == before
    assert "Bob" not in response.get_data(as_text=True)


def test_missing_csrf_token_is_400(app, client, auth, chat_id):
    response = client.post(
        f"/chats/{chat_id}/attachments",
        data={"file": (io.BytesIO(b"hello"), "notes.txt", "text/plain")},
        content_type="multipart/form-data",
        headers=HTMX,
    )
    assert response.status_code == 400
    assert "CSRF" in response.get_data(as_text=True)
    assert stored(app, chat_id) == []


def test_logged_out_upload_redirects_to_login(app, client, bob):
    before = snapshot(app)
    path = f"/chats/{bob['conversation']}/attachments"
    response = client.post(
        path,
        data={
            "file": (io.BytesIO(b"hello"), "notes.txt", "text/plain"),
            "csrf_token": anonymous_csrf(client),
        },
        content_type="multipart/form-data",
    )
    assert_redirects_to_login(response, next_path=path)
    assert snapshot(app) == before


def test_logged_out_api_upload_is_401(app, client, bob):
    before = snapshot(app)
    response = client.post(
        f"/api/chats/{bob['conversation']}/attachments",
        data={"file": (io.BytesIO(b"hello"), "notes.txt", "text/plain")},
        content_type="multipart/form-data",
    )
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert snapshot(app) == before


# -- the API route for scripts --------------------------------------------------------------------


def test_api_upload_with_a_bearer_token(app, user, chat_id):
    _, raw = add_token(app, user)
    script = app.test_client()
    data = make_pdf("Hello from a script")
    response = script.post(
        f"/api/chats/{chat_id}/attachments",
        data={"file": (io.BytesIO(data), "script.pdf", "application/pdf")},
        content_type="multipart/form-data",
        headers=bearer(raw),
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    body = response.get_json()
    assert set(body) == {"id", "filename", "content_type", "size"}
    assert (body["filename"], body["content_type"], body["size"]) == (
        "script.pdf",
        "application/pdf",
        len(data),
    )
    attachment = fetch(app, Attachment, body["id"])
    assert (attachment.user_id, attachment.conversation_id) == (user, chat_id)
    assert "Hello from a script" in read_attachment(app, user, chat_id, body["id"])["text"]


def test_api_upload_refusals_use_the_error_shape(make_app):
    app = make_app(attachment_max_bytes=100)
    from tests.factories import add_user

    user = add_user(app, "ada@example.com")
    chat_id = add_conversation(app, user)
    _, raw = add_token(app, user)
    script = app.test_client()

    def post(data, filename, content_type):
        return script.post(
            f"/api/chats/{chat_id}/attachments",
            data={"file": (io.BytesIO(data), filename, content_type)},
            content_type="multipart/form-data",
            headers=bearer(raw),
        )

    assert json_error(post(b"x" * 101, "a.txt", "text/plain"), 413) == "ATTACHMENT_REFUSED"
    assert json_error(post(b"PK", "a.zip", "application/zip"), 400) == "ATTACHMENT_REFUSED"
    response = script.post(f"/api/chats/{chat_id}/attachments", data={}, headers=bearer(raw))
    assert json_error(response, 400) == "ATTACHMENT_REFUSED"
    assert count(app, Attachment) == 0


# -- telling the model ----------------------------------------------------------------------------


def test_attachment_note_names_attachments_added_since_the_last_message(app, user, chat_id):
    with database(app).session() as session:
        assert attachment_note(session, chat_id, None) == ""
        first = store_attachment(session, user, chat_id, "a[1].txt", "text/plain", b"a")
        session.commit()
        note = attachment_note(session, chat_id, None)
        assert note == (
            f"[Attached: a(1).txt (attachment id {first.id}); use read_attachment to read it]"
        )
        message = insert_message(session, chat_id, role="user", kind="user", content="hi", meta={})
        session.commit()
        assert attachment_note(session, chat_id, message.sequence) == ""
        assert attachment_note(session, chat_id, None) == ""
        second = store_attachment(
            session, user, chat_id, "report.pdf", "application/pdf", make_pdf("x")
        )
        session.commit()
        assert attachment_note(session, chat_id, None) == (
            f"[Attached: report.pdf (attachment id {second.id}); use read_attachment to read it]"
        )
        assert str(first.id) in attachment_note(session, chat_id, 0)  # 0: every attachment


def test_store_attachment_raises_attachment_refused(app, user, chat_id):
    with database(app).session() as session:
        with pytest.raises(AttachmentRefused) as refused:
            store_attachment(session, user, chat_id, "x.bin", "application/zip", b"PK")
        assert refused.value.status == 400
        with pytest.raises(AttachmentRefused) as refused:
            store_attachment(session, user, chat_id, "x.txt", "text/plain", b"xx", max_bytes=1)
        assert refused.value.status == 413


def test_the_model_is_told_about_new_attachments(make_app, fake_model, auth):
    from tests.factories import ChatDriver
    from tests.fake_model import Turn, text

    app = make_app(anthropic_base_url=fake_model.base_url)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    driver = ChatDriver(app, auth.client, auth)
    chat_id = driver.new_chat()
    upload = auth.client.post(
        f"/chats/{chat_id}/attachments",
        data={
            "file": (io.BytesIO(b"Our launch brief."), "brief.txt", "text/plain"),
            "csrf_token": auth.csrf,
        },
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
    )
    assert upload.status_code == 201
    fake_model.script(Turn(text("Got it.")), Turn(text("Again.")))
    driver.wait(driver.send(chat_id, "Use my brief"))
    sent = fake_model.requests[-1]["messages"][-1]["content"][0]["text"]
    assert sent.startswith("Use my brief") and "[Attached: brief.txt (attachment id" in sent
    assert driver.rows(chat_id)[0]["content"] == "Use my brief"
    driver.wait(driver.send(chat_id, "And now?"))
    assert "Attached" not in fake_model.requests[-1]["messages"][-1]["content"][-1]["text"]


def _chat_on_fake_model(make_app, fake_model, auth):
    from tests.factories import ChatDriver

    app = make_app(anthropic_base_url=fake_model.base_url)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    return app, ChatDriver(app, auth.client, auth)


def attachment_note(session, conversation_id, since_sequence=None) -> str:
    """The model-facing note of the next message (as chat/turns.py writes it)."""
    return note_for(pending_attachments(session, conversation_id, since_sequence))


def _upload(auth, chat_id, filename, data=b"Some notes."):
    response = auth.client.post(
        f"/chats/{chat_id}/attachments",
        data={"file": (io.BytesIO(data), filename, "text/plain"), "csrf_token": auth.csrf},
        headers=HTMX,
        content_type="multipart/form-data",
    )
    assert response.status_code == 201, response.get_data(as_text=True)


def _last_user_text(request) -> str:
    """What the model read of the person's latest message (the blocks of the last turn)."""
    return " ".join(
        block.get("text", "")
        for block in request["messages"][-1]["content"]
        if block.get("type") == "text"
    )


def test_an_attachment_uploaded_while_a_reply_runs_is_announced_with_the_next_message(
    make_app, fake_model, auth
):
    """The run writes hidden tool-result rows (role user) after the upload: they are not
    the person's previous message, so the file is still announced with the next one."""
    import threading

    from tests.fake_model import Turn, text, tool_use

    app, driver = _chat_on_fake_model(make_app, fake_model, auth)
    chat_id = driver.new_chat()
    _upload(auth, chat_id, "before.txt")
    uploaded = threading.Event()
    replies = iter(
        [
            Turn(text("Let me look."), tool_use("list_offers", {})),
            Turn(text("You have no offers yet.")),
            Turn(text("I see the new file.")),
            Turn(text("Anything else?")),
        ]
    )

    def responder(body):
        if len(fake_model.requests) == 1:
            # The run is in flight, its tool call not made yet: the person attaches now.
            assert uploaded.wait(10)
        return next(replies)

    fake_model.responder = responder
    run_id = driver.send(chat_id, "What do I sell?")
    fake_model.wait_for_requests(1)
    _upload(auth, chat_id, "during.txt")
    uploaded.set()
    assert driver.wait(run_id)["status"] == "completed"
    first = _last_user_text(fake_model.requests[0])
    assert "[Attached: before.txt (attachment id" in first
    assert "during.txt" not in first

    driver.wait(driver.send(chat_id, "Read what I just attached"))
    second = _last_user_text(fake_model.requests[-1])
    assert "[Attached: during.txt (attachment id" in second
    assert "before.txt" not in second  # announced once, with the message it came before

    driver.wait(driver.send(chat_id, "Thanks"))
    assert "Attached" not in _last_user_text(fake_model.requests[-1])
    assert fake_model.rejections == []


def test_an_attachment_uploaded_while_a_card_waits_is_announced_with_the_message(
    make_app, fake_model, auth
):
    """A message dismisses the waiting card with a hidden tool-result row written just
    before the note is made: the file is still announced."""
    from tests.fake_model import Turn, text, tool_use

    app, driver = _chat_on_fake_model(make_app, fake_model, auth)
    with database(app).session() as session:
        session.add(Offer(user_id=session.scalar(select(User.id)), name="Calm Mornings"))
        session.commit()
    chat_id = driver.new_chat()
    fake_model.script(
        Turn(
            text("Which one?"),
            tool_use("select_offer", {"prompt": "Which offer?"}, id="toolu_pick"),
        ),
        Turn(text("I see the file.")),
    )
    assert driver.wait(driver.send(chat_id, "Write an ad"))["status"] == "awaiting"
    _upload(auth, chat_id, "brief.txt")

    driver.wait(driver.send(chat_id, "Use my brief instead"))

    assert "[Attached: brief.txt (attachment id" in _last_user_text(fake_model.requests[-1])


# -- chips: several files at once, removed before sending, shown on the row sent --------------


def test_several_files_in_one_upload_are_all_stored_and_one_refused_refuses_all(
    app, client, auth, chat_id
):
    two = {
        "file": [
            (io.BytesIO(b"one"), "one.txt", "text/plain"),
            (io.BytesIO(b"two"), "two.md", "text/markdown"),
        ],
        "csrf_token": auth.csrf,
    }
    response = client.post(
        f"/chats/{chat_id}/attachments", data=two, content_type="multipart/form-data", headers=HTMX
    )
    assert response.status_code == 201
    assert [a.filename for a in stored(app, chat_id)] == ["one.txt", "two.md"]
    bad = {
        "file": [
            (io.BytesIO(b"three"), "three.txt", "text/plain"),
            (io.BytesIO(b"MZ"), "tool.exe", "application/x-msdownload"),
        ],
        "csrf_token": auth.csrf,
    }
    response = client.post(
        f"/chats/{chat_id}/attachments", data=bad, content_type="multipart/form-data", headers=HTMX
    )
    assert response.status_code == 400
    assert "tool.exe" in banner_text(response)
    assert [a.filename for a in stored(app, chat_id)] == ["one.txt", "two.md"]


def test_refusals_are_in_plain_words(app, client, auth, chat_id):
    missing = client.post(
        f"/chats/{chat_id}/attachments",
        data={"csrf_token": auth.csrf},
        content_type="multipart/form-data",
        headers=HTMX,
    )
    assert "Choose a file to attach." in banner_text(missing)
    assert "multipart" not in banner_text(missing)
    wrong = upload(client, auth, chat_id, b"MZ", "tool.exe", "application/x-msdownload")
    assert "images can be attached" in banner_text(wrong)
    assert "images files" not in banner_text(wrong)


def test_a_file_not_yet_sent_can_be_removed(app, client, auth, chat_id):
    upload(client, auth, chat_id, b"keep", "keep.txt", "text/plain")
    upload(client, auth, chat_id, b"drop", "drop.txt", "text/plain")
    keep, drop = stored(app, chat_id)
    response = client.post(
        f"/chats/{chat_id}/attachments/{drop.id}/delete",
        data={"csrf_token": auth.csrf},
        headers=HTMX,
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "keep.txt" in html and "drop.txt" not in html
    assert "Remove keep.txt" in html
    assert [a.id for a in stored(app, chat_id)] == [keep.id]
    # Without htmx: back to the chat.
    response = client.post(
        f"/chats/{chat_id}/attachments/{keep.id}/delete", data={"csrf_token": auth.csrf}
    )
    assert response.status_code == 303 and stored(app, chat_id) == []


def test_removing_needs_the_csrf_token_and_the_right_chat(app, client, auth, user, chat_id):
    upload(client, auth, chat_id, b"x", "x.txt", "text/plain")
    [attachment] = stored(app, chat_id)
    other_chat = add_conversation(app, user, "Other")
    assert (
        client.post(
            f"/chats/{chat_id}/attachments/{attachment.id}/delete", headers=HTMX
        ).status_code
        == 400
    )
    wrong_chat = client.post(
        f"/chats/{other_chat}/attachments/{attachment.id}/delete",
        data={"csrf_token": auth.csrf},
        headers=HTMX,
    )
    assert wrong_chat.status_code == 404
    assert len(stored(app, chat_id)) == 1


def test_sent_files_show_on_their_row_and_can_no_longer_be_removed(make_app, fake_model, auth):
    from tests.fake_model import Turn, text

    app, driver = _chat_on_fake_model(make_app, fake_model, auth)
    chat_id = driver.new_chat()
    _upload(auth, chat_id, "brief.txt")
    page = auth.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "Remove brief.txt" in page
    fake_model.script(Turn(text("Got it.")))
    driver.wait(driver.send(chat_id, "Use my brief"))
    [attachment] = stored(app, chat_id)
    [row] = [r for r in driver.rows(chat_id) if r["kind"] == "user"]
    assert row["files"] == [{"id": attachment.id, "filename": "brief.txt", "size": 11}]
    page = auth.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "Remove brief.txt" not in page  # no chip: it went with the message
    assert f'class="row-file" data-attachment="{attachment.id}"' in page
    refused = auth.client.post(
        f"/chats/{chat_id}/attachments/{attachment.id}/delete",
        data={"csrf_token": auth.csrf},
        headers=HTMX,
    )
    assert refused.status_code == 409
    assert "already sent" in refused.get_data(as_text=True)
    assert len(stored(app, chat_id)) == 1
