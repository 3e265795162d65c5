"""Files the person attaches to a conversation: checked, stored, and turned into text the
host model can read with `read_attachment`.

Only a few kinds are accepted (plain text, Markdown, PDF, PNG/JPEG/WebP/GIF images) and the
bytes must be what the declared type says: PDFs start with `%PDF-`, images open in Pillow
and pass `verify()`, text decodes as UTF-8. The extracted text is untrusted content; the
read tool labels it so. Images get a one-line description (there is no vision model)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import unicodedata
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

DEFAULT_MAX_BYTES = 5_000_000
MAX_FILENAME_CHARS = 255
MAX_PDF_PAGES = 200
MAX_PDF_TEXT_CHARS = 2_000_000
FALLBACK_FILENAME = "attachment"

TEXT_TYPES = ("text/plain", "text/markdown")
PDF_TYPE = "application/pdf"
IMAGE_FORMATS = {  # content type -> the Pillow formats that may claim it
    "image/png": ("PNG",),
    "image/jpeg": ("JPEG", "MPO"),  # MPO: a camera JPEG with extra frames
    "image/webp": ("WEBP",),
    "image/gif": ("GIF",),
}
ALLOWED_TYPES = (*TEXT_TYPES, PDF_TYPE, *IMAGE_FORMATS)
IMAGE_SIGNATURES = {  # content type -> (offset, bytes) that its files start with
    "image/png": ((0, b"\x89PNG\r\n\x1a\n"),),
    "image/jpeg": ((0, b"\xff\xd8\xff"),),
    "image/webp": ((0, b"RIFF"), (8, b"WEBP")),
    "image/gif": ((0, b"GIF8"),),
}
TYPE_ALIASES = {
    "text/x-markdown": "text/markdown",
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
}
# What a generic type ("the browser doesn't know") means, by the file's extension.
EXTENSION_TYPES = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".pdf": PDF_TYPE,
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
GENERIC_TYPES = {"", "application/octet-stream", "binary/octet-stream"}
TYPE_LABELS = {
    "text/plain": "a text file",
    "text/markdown": "a Markdown file",
    PDF_TYPE: "a PDF",
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/webp": "a WebP image",
    "image/gif": "a GIF image",
}
SUPPORTED = "text (.txt), Markdown (.md), PDF, and PNG, JPEG, WebP or GIF images"


class AttachmentRefused(Exception):
    """Why a file was not stored: `status` 413 (too large) or 400 (unsupported/broken)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Upload(Protocol):
    """What `store_upload` needs from werkzeug's FileStorage."""

    filename: str | None
    content_type: str | None
    stream: Any


@dataclass(frozen=True)
class AttachmentSummary:
    """An attachment without its bytes, for lists and chips."""

    id: int
    filename: str
    content_type: str
    size: int
    created_at: datetime

    @property
    def size_label(self) -> str:
        return human_size(self.size)

    @property
    def kind(self) -> str:
        if self.content_type == PDF_TYPE:
            return "PDF"
        if self.content_type.startswith("image/"):
            return "Image"
        return "Text"


# -- storing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PdfLimits:
    """What one PDF's text extraction may cost (settings PDF_EXTRACT_SECONDS and
    PDF_MAX_CONTENT_BYTES); past either it is refused as too complex."""

    seconds: float = 15.0
    content_bytes: int = 8_000_000
    pages: int = MAX_PDF_PAGES
    text_chars: int = MAX_PDF_TEXT_CHARS


@dataclass(frozen=True)
class PreparedAttachment:
    """A checked file with its text, made before any transaction is opened."""

    filename: str
    content_type: str
    data: bytes
    text: str


def prepare_attachment(
    filename: str | None,
    content_type: str | None,
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    pdf_limits: PdfLimits | None = None,
) -> PreparedAttachment:
    """Check the file and extract its text; no database here (the slow part of an upload
    must hold nothing anyone else waits for). Raises AttachmentRefused."""
    name = safe_filename(filename)
    if len(data) > max_bytes:
        raise AttachmentRefused(
            413, f"{name} is too large: attachments can be at most {human_size(max_bytes)}."
        )
    if not data:
        raise AttachmentRefused(400, f"{name} is empty.")
    kind = resolve_type(name, content_type)
    text = extract_text(name, kind, data, pdf_limits or PdfLimits())
    return PreparedAttachment(name, kind, data, text)


def read_upload(
    upload: Upload | None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    pdf_limits: PdfLimits | None = None,
) -> PreparedAttachment:
    """`prepare_attachment` for a multipart upload (the `file` field); reads at most one
    byte more than allowed, so an oversized file is refused without being read whole.
    Call it with no transaction open."""
    if upload is None or not (upload.filename or "").strip():
        raise AttachmentRefused(400, "Choose a file to attach.")
    data = upload.stream.read(max_bytes + 1)
    return prepare_attachment(
        upload.filename, upload.content_type, data, max_bytes=max_bytes, pdf_limits=pdf_limits
    )


def safe_filename(filename: str | None) -> str:
    """The last path component, without control or formatting characters (bidi overrides),
    at most 255 characters with the extension kept."""
    name = unicodedata.normalize("NFC", filename or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(" " if ch.isspace() else ch for ch in name)  # no newlines or tabs
    name = "".join(ch for ch in name if not unicodedata.category(ch).startswith("C"))
    name = " ".join(name.split())
    if name in {"", ".", ".."}:
        return FALLBACK_FILENAME
    if len(name) > MAX_FILENAME_CHARS:
        stem, extension = os.path.splitext(name)
        extension = extension[:16]
        name = stem[: MAX_FILENAME_CHARS - len(extension)] + extension
    return name


def resolve_type(filename: str, content_type: str | None) -> str:
    """The accepted content type, from the declared one (or the extension when the declared
    type is generic). Raises AttachmentRefused(400) for anything else."""
    declared = (content_type or "").split(";", 1)[0].strip().lower()
    declared = TYPE_ALIASES.get(declared, declared)
    if declared in GENERIC_TYPES:
        declared = EXTENSION_TYPES.get(os.path.splitext(filename)[1].lower(), declared)
    if declared not in ALLOWED_TYPES:
        shown = f" ({declared})" if declared and declared not in GENERIC_TYPES else ""
        raise AttachmentRefused(
            400, f"{filename}{shown} cannot be attached: only {SUPPORTED} can be attached."
        )
    return declared


def _mismatch(filename: str, kind: str, detail: str = "") -> AttachmentRefused:
    label = TYPE_LABELS.get(kind, kind)
    return AttachmentRefused(
        400, f"{filename} is not {label}: its content does not match its type{detail}."
    )


# -- extracting text --------------------------------------------------------------------------


def extract_text(filename: str, kind: str, data: bytes, pdf_limits: PdfLimits) -> str:
    if kind in TEXT_TYPES:
        return _text(filename, kind, data)
    if kind == PDF_TYPE:
        return _pdf_text(filename, data, pdf_limits)
    return _image_description(filename, kind, data)


def _text(filename: str, kind: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _mismatch(filename, kind, " (it is not UTF-8 text)") from None
    if "\x00" in text:
        raise _mismatch(filename, kind, " (it contains binary data)")
    return text


PDF_WORKER = Path(__file__).with_name("pdf_worker.py")
# PDFs read at once by this process; more wait (holding nothing) for a turn.
PDF_SLOTS = threading.BoundedSemaphore(2)


def _pdf_text(filename: str, data: bytes, limits: PdfLimits) -> str:
    # The header may follow a little junk, as readers tolerate; nothing else is a PDF.
    if b"%PDF-" not in data[:1024]:
        raise _mismatch(filename, PDF_TYPE)
    answer = _run_pdf_worker(filename, data, limits)
    if "text" in answer:
        return answer["text"]
    if answer.get("refused") == "encrypted":
        raise AttachmentRefused(
            400, f"{filename} is password-protected: attach a copy without a password."
        )
    if answer.get("refused") == "too_complex":
        raise _too_complex(filename)
    raise AttachmentRefused(400, f"{filename} could not be read as a PDF (it may be damaged).")


def _too_complex(filename: str) -> AttachmentRefused:
    return AttachmentRefused(
        422,
        f"{filename} is too complex to read: its pages hold more drawing work than an "
        "attachment may. Attach a simpler copy (print it to a new PDF, or paste the text).",
    )


def _run_pdf_worker(filename: str, data: bytes, limits: PdfLimits) -> dict:
    """The PDF worker (app/workspace/pdf_worker.py) in a child process, killed when its
    time is up. The wait for a slot counts against the same time."""
    deadline = time.monotonic() + limits.seconds
    if not PDF_SLOTS.acquire(timeout=limits.seconds):
        raise AttachmentRefused(503, "Too many PDFs are being read right now: try again soon.")
    try:
        command = [
            sys.executable,
            "-I",  # isolated: no user site, no PYTHON* variables, no current directory
            str(PDF_WORKER),
            str(limits.pages),
            str(limits.text_chars),
            str(limits.content_bytes),
        ]
        try:
            finished = subprocess.run(
                command,
                input=data,
                capture_output=True,
                timeout=max(0.1, deadline - time.monotonic()),
                check=False,
                env=_worker_env(),
            )
        except subprocess.TimeoutExpired:
            raise _too_complex(filename) from None
    finally:
        PDF_SLOTS.release()
    try:
        return json.loads(finished.stdout)
    except ValueError:
        # Killed by its memory cap, or pypdf crashed the interpreter.
        return {"refused": "too_complex" if finished.returncode < 0 else "broken"}


def _worker_env() -> dict:
    """Only where Python finds its packages: the child gets no secrets."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _image_description(filename: str, kind: str, data: bytes) -> str:
    if not all(data[at : at + len(magic)] == magic for at, magic in IMAGE_SIGNATURES[kind]):
        raise _mismatch(filename, kind)
    from PIL import Image

    try:
        with warnings.catch_warnings():
            # An image with a huge pixel count is refused rather than decoded.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                image_format = image.format or ""
                image.verify()
            with Image.open(io.BytesIO(data)) as image:  # verify() leaves it unusable
                frames = getattr(image, "n_frames", 1)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise AttachmentRefused(400, f"{filename} has too many pixels to be attached.") from None
    except Exception:
        raise AttachmentRefused(
            400, f"{filename} could not be read as an image (it may be damaged)."
        ) from None
    if image_format not in IMAGE_FORMATS[kind]:
        raise _mismatch(filename, kind)
    label = "JPEG" if image_format == "MPO" else image_format
    animated = f", animated ({frames} frames)" if frames > 1 else ""
    return (
        f"[Image: {label}, {width} × {height} pixels{animated}, {human_size(len(data))}. "
        "No vision model is available, so what it shows is unknown: ask the person to "
        "describe it if it matters.]"
    )


# -- reading back -----------------------------------------------------------------------------


def note_for(files: list[AttachmentSummary]) -> str:
    return "\n".join(
        f"[Attached: {_note_name(file.filename)} (attachment id {file.id}); "
        "use read_attachment to read it]"
        for file in files
    )


def file_chips(files: list[AttachmentSummary]) -> list[dict]:
    """What a sent message's row shows of the files it went with (kept in its meta)."""
    return [{"id": f.id, "filename": f.filename, "size": f.size} for f in files]


def _note_name(filename: str) -> str:
    name = filename.replace("[", "(").replace("]", ")")
    return name if len(name) <= 120 else name[:119] + "…"


def human_size(size: int) -> str:
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1_000_000:.1f}".rstrip("0").rstrip(".") + " MB"
