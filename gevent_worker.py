"""`flask worker` on gevent (WORKER_POOL=gevent, the default): every run is a greenlet, so
one process reads hundreds of model streams without a thread each (FACTS.md). Patching
must happen before anything else is imported, hence this separate entry point."""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from app import create_app  # noqa: E402
from app.chat.worker import start_worker  # noqa: E402


def main() -> None:
    app = create_app()
    services = app.extensions["services"]
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else services.settings.worker_threads
    with app.app_context():
        start_worker(services, threads)


if __name__ == "__main__":
    main()
