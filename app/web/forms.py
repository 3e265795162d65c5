"""WTForms for every browser form; Flask-WTF adds the CSRF token to each."""

from __future__ import annotations

import re

from flask import current_app, g
from flask_wtf import FlaskForm
from werkzeug.utils import cached_property
from wtforms import BooleanField, PasswordField, SelectField, StringField, TextAreaField
from wtforms.validators import (
    AnyOf,
    DataRequired,
    Email,
    EqualTo,
    Length,
    Optional,
    StopValidation,
    ValidationError,
)

from app.accounts.models import SCOPES
from app.accounts.passwords import password_problem
from app.mcp.models import POLICIES
from app.mcp.servers import ServerRefused

HEX_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")


class _SentAtMost:
    """The length of what was sent, blank or not: WTForms' Optional ends the chain at a
    blank value (whitespace of any kind included) before Length can see it, so a longer run
    of spaces was accepted."""

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length

    def __call__(self, form, field) -> None:
        sent = field.raw_data[0] if field.raw_data else None
        if isinstance(sent, str) and len(sent) > self.max_length:
            raise StopValidation(f"Field cannot be longer than {self.max_length} characters.")


def optional_text(max_length: int) -> list:
    """The validators of a text that may be left blank: at most `max_length` characters as
    sent (Length stays in the list: the OpenAPI document reads its maxLength there)."""
    return [_SentAtMost(max_length), Optional(), Length(max=max_length)]


class Form(FlaskForm):
    """Every browser form. A request authenticated by a bearer token is exempt from CSRF
    here too, like in the app-wide check (docs/CONTRACT.md: a token works on every route)."""

    class Meta:
        @cached_property
        def csrf(self):
            if g.get("authenticated_by_bearer"):
                return False
            return current_app.config.get("WTF_CSRF_ENABLED", True)


class NewPassword:
    """A new password: long enough and not a common one (app.accounts.passwords). The email
    comes from the form's `email` field, or from the person logged in."""

    def __call__(self, form, field):
        from flask_login import current_user

        email = form.email.data if hasattr(form, "email") else getattr(form, "account_email", "")
        if not email and current_user and current_user.is_authenticated:
            email = current_user.email
        problem = password_problem(field.data or "", email or "")
        if problem:
            raise ValidationError(problem)


class LoginForm(Form):
    email = StringField("Email", validators=[DataRequired(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


class SignupForm(Form):
    email = StringField("Email", validators=[DataRequired(), Email(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired(), NewPassword()])
    confirm = PasswordField(
        "Repeat password", validators=[DataRequired(), EqualTo("password", "Passwords differ.")]
    )


class ForgotPasswordForm(Form):
    email = StringField("Email", validators=[DataRequired(), Email(), Length(max=254)])


class ResetPasswordForm(Form):
    """A new password set through a mailed link; `account_email` (whose account) feeds
    the password check, as the email field does at sign-up."""

    account_email = ""
    new_password = PasswordField("New password", validators=[DataRequired(), NewPassword()])
    confirm = PasswordField(
        "Repeat new password",
        validators=[DataRequired(), EqualTo("new_password", "Passwords differ.")],
    )


class UserCreateForm(Form):
    email = StringField("Email", validators=[DataRequired(), Email(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired(), NewPassword()])
    is_admin = BooleanField("Administrator")


class ChatTitleForm(Form):
    title = StringField("Title", validators=[DataRequired(), Length(max=120)])


class OfferForm(Form):
    # The JSON API takes the colours as a list (app/web/workspace_api.py joins them).
    api_shapes = {
        "brand_colors": {
            "type": "array",
            # Seven characters starting with the colour: exact in every regex dialect
            # (a `$` lets Python's regex take a trailing newline).
            "items": {
                "type": "string",
                "pattern": "^#[0-9a-fA-F]{6}",
                "minLength": 7,
                "maxLength": 7,
            },
            "maxItems": 20,
            "description": "Brand colours, like #1f6feb",
        }
    }
    name = StringField("Name", validators=[DataRequired(), Length(max=120)])
    description = TextAreaField("What it is", validators=optional_text(4000))
    audience = TextAreaField("Who it is for", validators=optional_text(2000))
    price = StringField("Price", validators=optional_text(60))
    brand_colors = StringField(
        "Brand colours",
        description="Hex colours separated by commas, for example #1f6feb, #ffd33d",
        validators=optional_text(200),
    )

    def validate_brand_colors(self, field):
        for colour in self.colour_list():
            if not HEX_COLOUR.match(colour):
                raise ValidationError(f"{colour!r} is not a colour like #1f6feb.")

    def colour_list(self) -> list[str]:
        return [c.strip() for c in (self.brand_colors.data or "").split(",") if c.strip()]

    def apply_to(self, offer) -> None:
        """The validated values onto the offer (the page and the API save the same way)."""
        offer.name = self.name.data.strip()
        offer.description = self.description.data or ""
        offer.audience = self.audience.data or ""
        offer.price = self.price.data or ""
        offer.brand_colors = self.colour_list()


class PersonaForm(Form):
    name = StringField("Name", validators=[DataRequired(), Length(max=120)])
    offer_id = SelectField("For offer", coerce=int, validate_choice=True)
    description = TextAreaField("Who they are", validators=optional_text(4000))
    pains = TextAreaField("Pains", validators=optional_text(2000))
    goals = TextAreaField("Goals", validators=optional_text(2000))

    def apply_to(self, persona) -> None:
        persona.name = self.name.data.strip()
        persona.offer_id = self.offer_id.data or None
        persona.description = self.description.data or ""
        persona.pains = self.pains.data or ""
        persona.goals = self.goals.data or ""


# Days a new token lasts ("" never expires).
TOKEN_LIFETIMES = [
    ("", "Never"),
    ("7", "7 days"),
    ("30", "30 days"),
    ("90", "90 days"),
    ("365", "A year"),
]


class TokenForm(Form):
    name = StringField("Token name", validators=[DataRequired(), Length(max=80)])
    # Only these boxes count; "admin" is refused for someone who is not an admin.
    scope_read = BooleanField("read", default=True)
    scope_chat = BooleanField("chat", default=True)
    scope_admin = BooleanField("admin")
    expires = StringField(
        "Expires",
        default="",
        validators=[AnyOf([value for value, _ in TOKEN_LIFETIMES], "Choose how long it lasts.")],
    )
    lifetimes = TOKEN_LIFETIMES

    def scopes(self) -> tuple[str, ...]:
        return tuple(s for s in SCOPES if getattr(self, f"scope_{s}").data)

    def validate_scope_admin(self, field):
        from flask_login import current_user

        if field.data and not current_user.is_admin:
            raise ValidationError("Only an admin can make a token with the admin scope.")

    def validate(self, extra_validators=None) -> bool:
        valid = super().validate(extra_validators)
        if valid and not self.scopes():
            self.scope_read.errors.append("Choose at least one scope.")
            return False
        return valid


class ConfirmForm(Form):
    """A form with nothing but the CSRF token, for buttons that change something."""


# -- settings: projects ----------------------------------------------------------------


class ProjectNameForm(Form):
    name = StringField(
        "Project name",
        filters=[lambda value: value.strip() if isinstance(value, str) else value],
        validators=[DataRequired(message="Name the project."), Length(max=80)],
    )


INVITE_ROLES = ["editor", "viewer", "owner"]  # the likeliest first


class InviteForm(Form):
    email = StringField(
        "Email address",
        validators=[
            DataRequired(message="Write their email address."),
            Email(message="That is not an email address."),
            Length(max=254),
        ],
    )
    role = StringField(
        "Role",
        default="editor",
        validators=[AnyOf(INVITE_ROLES, "Choose a role: editor, viewer or owner.")],
    )
    roles = INVITE_ROLES


# -- settings: memory and account ------------------------------------------------------


def _unix_newlines(value):
    """Browsers send a textarea's line breaks as CRLF; count and store them as one."""
    return value.replace("\r\n", "\n") if isinstance(value, str) else value


def _stripped(value):
    return value.strip() if isinstance(value, str) else value


class InstructionsForm(Form):
    # The cap itself is checked by app.memory.store (MemoryRefused), the one write path.
    instructions = TextAreaField("Personal instructions", filters=[_unix_newlines])


class FactForm(Form):
    fact = StringField(
        "Add a fact",
        filters=[_stripped],
        validators=[DataRequired(message="Write the fact."), Length(max=280)],
    )


class FactEditForm(Form):
    fact = StringField("Fact", validators=[DataRequired(), Length(max=280)])
    new_fact = StringField(
        "Fact",
        filters=[_stripped],
        validators=[DataRequired(message="Write the fact."), Length(max=280)],
    )


class ImportForm(Form):
    text = TextAreaField(
        "Text to learn from",
        filters=[_unix_newlines],
        validators=[DataRequired(message="Paste some text first."), Length(max=20_000)],
    )


class PasswordChangeForm(Form):
    current_password = PasswordField(
        "Current password", validators=[DataRequired(), Length(max=200)]
    )
    new_password = PasswordField("New password", validators=[DataRequired(), NewPassword()])
    confirm = PasswordField(
        "Repeat the new password",
        validators=[DataRequired(), EqualTo("new_password", "Passwords differ.")],
    )


class WelcomeForm(Form):
    role = StringField(
        "Your role",
        filters=[_stripped],
        description="For example: founder, marketing lead, freelance copywriter.",
        validators=[DataRequired(message="Tell us your role."), Length(max=120)],
    )
    company = StringField(
        "Your company",
        filters=[_stripped],
        validators=[DataRequired(message="Tell us your company."), Length(max=120)],
    )
    website = StringField(
        "Website (optional)",
        filters=[_stripped],
        description="We read its front page once to suggest first requests.",
        validators=optional_text(300),
    )

    def validate_website(self, field):
        from app.accounts.onboarding import normalize_website

        url = normalize_website(field.data or "")
        scheme, _, rest = url.partition("://")
        if scheme.lower() not in ("http", "https") or not rest.split("/")[0] or " " in url:
            raise ValidationError("Enter a web address like example.com.")
        if len(url) > 300:
            raise ValidationError("Field cannot be longer than 300 characters.")
        field.data = url


# -- MCP servers ----------------------------------------------------------------------------

POLICY_LABELS = {
    "when_tainted": "Ask before calls once the chat has read outside content (default)",
    "always": "Ask before every call",
    "never": "Never ask for tools approved as read-only",
}


class McpServerForm(Form):
    name = StringField("Name", validators=[DataRequired(), Length(max=32)])
    url = StringField("Server URL", validators=optional_text(2000))
    command = StringField("Or a local command (admins)", validators=optional_text(2000))
    headers = TextAreaField("Headers, one 'Name: value' a line", validators=[Length(max=8000)])
    policy = StringField(
        "When to ask", default="when_tainted", validators=[AnyOf(POLICIES, "Choose a policy.")]
    )
    policies = [(policy, POLICY_LABELS[policy]) for policy in POLICIES]

    def header_dict(self) -> dict[str, str]:
        headers = {}
        for line in (self.headers.data or "").splitlines():
            if line.strip():
                key, colon, value = line.partition(":")
                if not colon:
                    raise ServerRefused(f"{line.strip()!r} is not 'Name: value'.")
                headers[key.strip()] = value.strip()
        return headers
