"""Every stable `error.code` the HTTP API answers with, and what each means: the one list
that the code raising errors names (ApiError, TurnRejected, the error handlers) and that
the OpenAPI document (app/web/openapi.py) and docs/CONTRACT.md describe.

At the bottom layer because app.chat refuses turns with these codes while app.web answers
them. A StrEnum is its str: it goes on the wire as is."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    BAD_REQUEST = "BAD_REQUEST"
    CSRF_FAILED = "CSRF_FAILED"
    INVALID_INPUT = "INVALID_INPUT"
    INVALID_JSON = "INVALID_JSON"
    INVALID_FIELD = "INVALID_FIELD"
    INVALID_BODY = "INVALID_BODY"
    INVALID_ANSWER = "INVALID_ANSWER"
    INVALID_RULES = "INVALID_RULES"
    MEMORY_REFUSED = "MEMORY_REFUSED"
    ATTACHMENT_REFUSED = "ATTACHMENT_REFUSED"
    MCP_SERVER_REFUSED = "MCP_SERVER_REFUSED"
    MODEL_REFUSED = "MODEL_REFUSED"
    UNKNOWN_MODEL = "UNKNOWN_MODEL"
    PRESET_REFUSED = "PRESET_REFUSED"
    INVALID_SCHEDULE = "INVALID_SCHEDULE"
    UNKNOWN_TIME_ZONE = "UNKNOWN_TIME_ZONE"
    TOO_MANY_SCHEDULES = "TOO_MANY_SCHEDULES"
    UNAUTHORIZED = "UNAUTHORIZED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    FORBIDDEN = "FORBIDDEN"
    PROJECT_ROLE = "PROJECT_ROLE"
    INSUFFICIENT_SCOPE = "INSUFFICIENT_SCOPE"
    EMAIL_UNCONFIRMED = "EMAIL_UNCONFIRMED"
    SESSION_REQUIRED = "SESSION_REQUIRED"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    CONFLICT = "CONFLICT"
    RUN_IN_FLIGHT = "RUN_IN_FLIGHT"
    CARD_NOT_AWAITING = "CARD_NOT_AWAITING"
    NOT_AN_ANSWER = "NOT_AN_ANSWER"
    QUEUE_FULL = "QUEUE_FULL"
    TOO_LARGE = "TOO_LARGE"
    DOWNLOAD_TOO_LARGE = "DOWNLOAD_TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    RATE_LIMITED = "RATE_LIMITED"
    TOO_MANY_RUNS = "TOO_MANY_RUNS"
    INTERNAL = "INTERNAL"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Meaning:
    statuses: tuple[int, ...]  # the HTTP statuses it comes with
    text: str


MEANINGS: dict[ErrorCode, Meaning] = {
    ErrorCode.BAD_REQUEST: Meaning(
        (400,), "The request could not be read (a broken form or upload)."
    ),
    ErrorCode.CSRF_FAILED: Meaning(
        (400,),
        "A browser session's change without its CSRF token (send `X-CSRFToken`, or use a "
        "bearer token).",
    ),
    ErrorCode.INVALID_INPUT: Meaning(
        (400,),
        "The address, a form field or a file name holds text refused everywhere (a NUL byte, "
        "a control character, an unpaired surrogate); `message` says where.",
    ),
    ErrorCode.INVALID_JSON: Meaning(
        (400,),
        "The JSON body is not valid JSON, not an object, or nested too deeply (also a refused "
        "character in a JSON request's address).",
    ),
    ErrorCode.INVALID_FIELD: Meaning(
        (400,),
        "A field of the body or a query parameter is missing, unknown, of the wrong type or "
        "out of bounds; `field` names it.",
    ),
    ErrorCode.INVALID_BODY: Meaning(
        (400,),
        "The loop body is none of its four kinds: `message`, `toolResponse`, `regenerate`, `edit`.",
    ),
    ErrorCode.INVALID_ANSWER: Meaning(
        (400,), "A card's answer does not fit its questions; `message` says which."
    ),
    ErrorCode.INVALID_RULES: Meaning(
        (400,),
        "The guidelines cannot replace the current ones (an unknown or repeated id, too many, "
        "a blank text); nothing changed.",
    ),
    ErrorCode.MEMORY_REFUSED: Meaning(
        (400,), "The memory write was refused (too long, too many facts); nothing changed."
    ),
    ErrorCode.ATTACHMENT_REFUSED: Meaning(
        (400, 413, 422, 503),
        "The file was not stored: 400 a kind not accepted or a broken file, 413 too large, "
        "422 its text cannot be read, 503 the store is unavailable.",
    ),
    ErrorCode.INVALID_SCHEDULE: Meaning(
        (400,),
        "A schedule's `cron` or `when` cannot be used: not five fields (a sixth, seconds, "
        "would fire more than once a minute), unreadable, or never firing (the 30th of "
        "February); `field` names it.",
    ),
    ErrorCode.UNKNOWN_TIME_ZONE: Meaning(
        (400,), "A schedule's `timezone` is not an IANA time zone name (such as Europe/Berlin)."
    ),
    ErrorCode.TOO_MANY_SCHEDULES: Meaning(
        (400,), "The chat already has as many scheduled messages as it may: delete one first."
    ),
    ErrorCode.UNAUTHORIZED: Meaning((401,), "No session and no valid bearer token."),
    ErrorCode.QUOTA_EXCEEDED: Meaning((402,), "This month's credit allowance is used up."),
    ErrorCode.FORBIDDEN: Meaning((403,), "Only an admin may do this."),
    ErrorCode.PROJECT_ROLE: Meaning(
        (403,),
        "Your role in the project does not allow this: a viewer changing its workspace, "
        "or someone but an owner managing its members, name or deletion.",
    ),
    ErrorCode.INSUFFICIENT_SCOPE: Meaning(
        (403,), "The bearer token lacks the scope this needs (`read`, `chat` or `admin`)."
    ),
    ErrorCode.EMAIL_UNCONFIRMED: Meaning(
        (403,),
        "With VERIFY_EMAIL on, a person who has not yet confirmed their address (the mailed "
        "link) cannot start a reply.",
    ),
    ErrorCode.SESSION_REQUIRED: Meaning(
        (403,), "This needs a browser session: a token cannot do it."
    ),
    ErrorCode.NOT_FOUND: Meaning(
        (404,), "No such thing of yours (another person's is not found either)."
    ),
    ErrorCode.METHOD_NOT_ALLOWED: Meaning(
        (405,), "The path does not take this method; `Allow` lists those it takes."
    ),
    ErrorCode.CONFLICT: Meaning((409,), "The thing's state forbids this now."),
    ErrorCode.MCP_SERVER_REFUSED: Meaning(
        (400, 409),
        "The MCP server was not added or changed: 400 its name, address, headers or tools "
        "cannot be used (or it did not answer), 409 the name is taken. Nothing was saved.",
    ),
    ErrorCode.MODEL_REFUSED: Meaning(
        (400, 409),
        "The model was not listed or changed: 400 a number or label the rules refuse (the "
        "message says which), 409 the name is listed already. Nothing was saved.",
    ),
    ErrorCode.UNKNOWN_MODEL: Meaning(
        (400,), "No model of that name is offered (`GET /api/models` lists them)."
    ),
    ErrorCode.PRESET_REFUSED: Meaning(
        (400,),
        "The preset was not saved: an empty or taken name, an unknown tool group or model, "
        "too many or too long starters; `field` names which. Nothing was saved.",
    ),
    ErrorCode.RUN_IN_FLIGHT: Meaning(
        (409,), "A reply is already being written in this chat: wait for it or stop it."
    ),
    ErrorCode.QUEUE_FULL: Meaning(
        (409,), "The chat already holds the most queued messages it may: remove one or wait."
    ),
    ErrorCode.CARD_NOT_AWAITING: Meaning(
        (409,), "The card was already answered, or is not the one the chat waits on."
    ),
    ErrorCode.NOT_AN_ANSWER: Meaning(
        (422,),
        "Feedback is for the host's answers: this row is a person's message, a card, a tool "
        "row or a notice.",
    ),
    ErrorCode.TOO_LARGE: Meaning(
        (413,),
        "The request is over the server's size limit, or a message is longer than "
        "MAX_MESSAGE_CHARS (`field` names it).",
    ),
    ErrorCode.DOWNLOAD_TOO_LARGE: Meaning(
        (413,), "The download would be larger than the server makes at once."
    ),
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: Meaning(
        (415,), "Send the body as JSON, with `Content-Type: application/json`."
    ),
    ErrorCode.RATE_LIMITED: Meaning(
        (429,), "Too many requests of this kind; `Retry-After` says when to try again."
    ),
    ErrorCode.TOO_MANY_RUNS: Meaning(
        (429,),
        "Too many replies being written in your other chats; `Retry-After` says when to try again.",
    ),
    ErrorCode.INTERNAL: Meaning((500,), "Something went wrong on the server's side."),
    ErrorCode.ERROR: Meaning((), "Another HTTP error: its status says which."),
}

# The code of an HTTP error that carries none of its own (werkzeug's, abort(404)).
BY_STATUS: dict[int, ErrorCode] = {
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.UNAUTHORIZED,
    402: ErrorCode.QUOTA_EXCEEDED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.INTERNAL,
}


def for_status(status: int) -> ErrorCode:
    return BY_STATUS.get(status, ErrorCode.ERROR)
