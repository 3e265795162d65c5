"""Prepare a database for a benchmark server, in one process (each `flask` command would
import the app again, seconds apiece):

    python -m bench.app_setup --users 200

With the server's environment (`DATABASE_URL`, `INSTANCE_PATH`, ...): runs the migrations,
creates `--users` accounts (`bench-<i>@example.com`, no usable password: they sign in with
their token) and prints one JSON line, `{"tokens": [...]}`, a bearer token per account.
One account per stream keeps the per-person limits (runs in flight, rate limit) and the
per-person list updates of production, where streams belong to different people.
"""

from __future__ import annotations

import argparse
import json
import logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.app_setup")
    parser.add_argument("--users", type=int, default=1)
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)  # alembic's progress lines; the JSON line is the output

    from flask_migrate import upgrade

    from app import create_app
    from app.accounts.models import ApiToken, User

    app = create_app()
    with app.app_context():
        upgrade()
        database = app.extensions["database"]
        tokens = []
        with database.session() as session:
            for index in range(args.users):
                user = User(
                    email=f"bench-{index}@example.com", password_hash="-", display_name="bench"
                )
                token, raw = ApiToken.issue(user, "bench")
                session.add_all([user, token])
                tokens.append(raw)
            session.commit()
        app.extensions["services"].close()
    print(json.dumps({"tokens": tokens}), flush=True)


if __name__ == "__main__":
    main()
