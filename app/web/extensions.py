"""Flask extensions, created unbound and initialised in the app factory."""

from flask_limiter import Limiter
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sock import Sock
from flask_wtf.csrf import CSRFProtect

from app.web import limit_storage  # noqa: F401  (registers the loopdesk-memory:// storage)
from app.web.identity import rate_limit_key

login_manager = LoginManager()
csrf = CSRFProtect()
migrate = Migrate()
sock = Sock()
limiter = Limiter(key_func=rate_limit_key, default_limits=[])


def _message_limit() -> str:
    from flask import current_app

    return current_app.config["LOOPDESK"].rate_limit_messages


# One budget per person shared by every way of sending a message (API and page).
message_rate_limit = limiter.shared_limit(_message_limit, scope="messages", methods=["POST"])


def _model_work_limit() -> str:
    from flask import current_app

    return current_app.config["LOOPDESK"].rate_limit_model_work


# One budget per person for every route that calls a model or starts background work
# without being a message (onboarding, memory instruct and import, settings import).
MODEL_WORK_SCOPE = "model-work"
model_work_rate_limit = limiter.shared_limit(
    _model_work_limit, scope=MODEL_WORK_SCOPE, methods=["POST"]
)


def _skipping_welcome() -> bool:
    from flask import request

    return request.form.get("action") == "skip"


# /welcome's "Skip" starts nothing: only its other posts spend the budget.
welcome_rate_limit = limiter.shared_limit(
    _model_work_limit, scope=MODEL_WORK_SCOPE, methods=["POST"], exempt_when=_skipping_welcome
)


def _data_download_limit() -> str:
    from flask import current_app

    return current_app.config["LOOPDESK"].rate_limit_data_downloads


# "Download all my data" builds a zip of everything (seconds of a thread for a large
# account): one budget per person for the page's link and the API.
DATA_DOWNLOAD_SCOPE = "data-downloads"
data_download_rate_limit = limiter.shared_limit(_data_download_limit, scope=DATA_DOWNLOAD_SCOPE)
