"""Text out of a PDF, in a process of its own: `python pdf_worker.py MAX_PAGES MAX_CHARS
MAX_CONTENT_BYTES` reads the PDF on stdin and writes one JSON object on stdout.

A small PDF can hold a lot of work (16 pages that share one heavy content stream, a
compression bomb, forms inside forms), and pypdf is pure Python: run in the web process it
would hold a thread, its memory and (before this) the database for as long as it takes.
Here it runs as a script of the standard library and pypdf only (not the app package, so
it starts quickly), with an address-space cap; the caller kills it when its time is up
(app/workspace/attachments.py). Nothing in it touches the database.

Answers: {"text": ...}, or {"refused": "broken" | "encrypted" | "too_complex"}."""

from __future__ import annotations

import io
import json
import sys

# Enough for pypdf on a few-MB file; a bomb that decompresses past it fails here, alone.
MEMORY_LIMIT_BYTES = 1024 * 1024 * 1024


class TooComplex(Exception):
    pass


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform: the time limit still holds


def _content_bytes(page) -> int:
    """The decoded size of the page's content streams (a shared stream counts again for
    every page that draws it: pypdf parses it again for each)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    contents = contents.get_object()
    streams = contents if isinstance(contents, list) else [contents]
    return sum(len(stream.get_object().get_data()) for stream in streams)


def _pages_text(reader, max_pages: int, max_chars: int, max_content: int) -> str:
    pages = reader.pages
    total = len(pages)
    if total == 0:
        raise ValueError("no pages")
    read = min(total, max_pages)
    content = 0
    for number in range(read):
        content += _content_bytes(pages[number])
        if content > max_content:
            raise TooComplex
    parts: list[str] = []
    notes: list[str] = []
    length = 0
    found_text = False
    for number in range(read):
        try:
            page_text = (pages[number].extract_text() or "").replace("\x00", "").strip()
            found_text = found_text or bool(page_text)
        except MemoryError:
            raise TooComplex from None
        except Exception:
            page_text = "[This page could not be read.]"
        if page_text:
            parts.append(f"--- Page {number + 1} ---\n{page_text}")
            length += len(parts[-1])
        if length > max_chars:
            notes.append(f"[Text extraction stopped after page {number + 1}: too much text.]")
            break
    else:
        if total > max_pages:
            notes.append(f"[Only the first {max_pages} of {total} pages were read.]")
    if not found_text:
        pages_word = "page" if total == 1 else "pages"
        return (
            f"[This PDF ({total} {pages_word}) has no extractable text: it may be scanned "
            "images or drawings. Ask the person to paste the text they want used.]"
        )
    return "\n\n".join(parts + notes)


def extract(data: bytes, max_pages: int, max_chars: int, max_content: int) -> dict:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return {"refused": "encrypted"}
        return {"text": _pages_text(reader, max_pages, max_chars, max_content)}
    except (TooComplex, MemoryError, RecursionError):
        return {"refused": "too_complex"}
    except Exception:
        return {"refused": "broken"}


def main(argv: list[str]) -> int:
    _limit_memory()
    max_pages, max_chars, max_content = (int(value) for value in argv[1:4])
    answer = extract(sys.stdin.buffer.read(), max_pages, max_chars, max_content)
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
