"""An upload holds nothing anyone else needs: the body is read and the text extracted
(PDFs in a separate process, with page, content and time limits) before any transaction,
so a trickled upload or a heavy PDF never keeps another person from sending a message
(on SQLite, one write lock serves the whole database)."""

from __future__ import annotations

import io
import socket
import threading
import zlib

import pytest
from werkzeug.test import encode_multipart

import app.workspace.attachments as attachments
from app.chat.models import Message
from app.workspace.models import Attachment
from tests.factories import AuthActions, add_conversation, add_token, add_user
from tests.live import LiveServer
from tests.web.helpers import count


def heavy_pdf(pages: int, operations: int) -> bytes:
    """A few KB on disk: `pages` pages that all draw one compressed content stream of
    `operations` text operations (pypdf parses it again for every page)."""
    content = b"BT /F1 12 Tf " + b"(x) Tj 1 0 Td " * operations + b"ET"
    packed = zlib.compress(content, 9)
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objects += [page] * pages
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _ada_sends(app, chat_id: int, client, auth) -> None:
    """Another person's message: accepted (202) and its row stored."""
    response = client.post(
        f"/api/chats/{chat_id}/loop", json={"message": "still here?"}, headers=auth.headers()
    )
    assert response.status_code == 202, response.get_data(as_text=True)
    assert count(app, Message, Message.conversation_id == chat_id, Message.kind == "user") == 1


@pytest.fixture
def ada(app):
    client = app.test_client()
    auth = AuthActions(app, client)
    user_id = auth.create("ada@example.com")
    auth.login("ada@example.com")
    return client, auth, add_conversation(app, user_id)


def test_a_heavy_pdf_is_refused_as_too_complex_at_once(app, client, auth, user):
    chat = add_conversation(app, user)
    data = heavy_pdf(16, 200_000)
    assert len(data) < 20_000  # small on disk; megabytes of drawing once decompressed
    response = client.post(
        f"/api/chats/{chat}/attachments",
        data={"file": (io.BytesIO(data), "brochure.pdf", "application/pdf")},
        headers=auth.headers(),
    )
    assert response.status_code == 422, response.get_data(as_text=True)
    body = response.get_json()["error"]
    assert body["code"] == "ATTACHMENT_REFUSED"
    assert "brochure.pdf is too complex to read" in body["message"]
    assert count(app, Attachment) == 0


def test_a_pdf_over_its_time_limit_is_refused_while_others_send(make_app, monkeypatch):
    """Content under the size cap, but slower to read than PDF_EXTRACT_SECONDS allows:
    its process is killed, the upload refused; meanwhile another person's message is
    accepted (the extraction holds no transaction)."""
    app = make_app(pdf_extract_seconds=2, pdf_max_content_bytes=10**9)
    bob_client = app.test_client()
    bob = AuthActions(app, bob_client)
    bob_id = bob.create("bob@example.com")
    bob.login("bob@example.com")
    bob_chat = add_conversation(app, bob_id)
    ada_client = app.test_client()
    ada = AuthActions(app, ada_client)
    ada_chat = add_conversation(app, ada.create("ada@example.com"))
    ada.login("ada@example.com")

    extracting = threading.Event()
    real_worker = attachments._run_pdf_worker

    def observed(*args):
        extracting.set()
        return real_worker(*args)

    monkeypatch.setattr(attachments, "_run_pdf_worker", observed)
    answers = []

    def upload():
        answers.append(
            bob_client.post(
                f"/api/chats/{bob_chat}/attachments",
                data={"file": (io.BytesIO(heavy_pdf(16, 40_000)), "slow.pdf", "application/pdf")},
                headers=bob.headers(),
            )
        )

    uploader = threading.Thread(target=upload)
    uploader.start()
    assert extracting.wait(10)
    _ada_sends(app, ada_chat, ada_client, ada)
    assert uploader.is_alive(), "the message should not have waited for the extraction"
    uploader.join(30)
    response = answers[0]
    assert response.status_code == 422, response.get_data(as_text=True)
    assert "slow.pdf is too complex to read" in response.get_json()["error"]["message"]
    assert count(app, Attachment) == 0


def test_a_trickled_upload_holds_nothing_another_person_needs(app, ada):
    """An upload sent one byte at a time (a slow or hostile client) to a live server:
    half-way through, another person's message is accepted; then the upload completes."""
    ada_client, ada_auth, ada_chat = ada
    bob = add_user(app, "bob@example.com")
    bob_chat = add_conversation(app, bob)
    _, raw_token = add_token(app, bob)
    body, content_type = _multipart(b"notes, sent slowly\n" * 8)
    head = (
        f"POST /api/chats/{bob_chat}/attachments HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: Bearer {raw_token}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    live = LiveServer(app).start()
    try:
        with socket.create_connection(("127.0.0.1", live.server.server_port), 10) as conn:
            conn.sendall(head)
            for index in range(len(body)):
                conn.sendall(body[index : index + 1])
                if index == len(body) // 2:
                    _ada_sends(app, ada_chat, ada_client, ada_auth)
                    assert count(app, Attachment) == 0
            answer = _read_all(conn)
    finally:
        live.stop()
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    assert count(app, Attachment, Attachment.conversation_id == bob_chat) == 1


def _multipart(data: bytes) -> tuple[bytes, str]:
    from werkzeug.datastructures import FileStorage

    boundary, body = encode_multipart(
        {"file": FileStorage(io.BytesIO(data), "notes.txt", content_type="text/plain")}
    )
    return body, f"multipart/form-data; boundary={boundary}"


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)
