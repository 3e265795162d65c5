"""Whether a new password is good enough: long enough, and not a common or easily guessed
one. zxcvbn knows the common-password lists, dictionary words, names, keyboard walks,
dates and repeats, and is told the person's own email too."""

from __future__ import annotations

from zxcvbn import zxcvbn

MIN_LENGTH = 8
MAX_LENGTH = 200
# zxcvbn rates 0..4; 2 is "somewhat guessable" (about 10^8 guesses), below that the
# password is on the common lists or close to it.
MIN_SCORE = 2
ZXCVBN_MAX_LENGTH = 72  # zxcvbn refuses longer input; the first 72 characters decide


def password_problem(password: str, email: str = "") -> str | None:
    """What is wrong with `password` as a new one, in words for the form; None if fine."""
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        return f"Use {MIN_LENGTH} to {MAX_LENGTH} characters."
    local, _, domain = email.lower().partition("@")
    hints = [part for part in (local, domain, "loopdesk") if part]
    result = zxcvbn(password[:ZXCVBN_MAX_LENGTH], user_inputs=hints)
    if result["score"] >= MIN_SCORE:
        return None
    warning = result["feedback"].get("warning") or "This password is too easy to guess."
    return f"{warning.rstrip('.')}. Try a longer phrase of a few unrelated words."
