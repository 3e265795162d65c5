"""Three MCP calls at once under gevent's monkey patching, as `make run` serves, beside a
greenlet that counts while they wait: prints the calls' outcomes and the count."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402

import gevent  # noqa: E402

from app.mcp.client import McpClient, Target  # noqa: E402

ticks = [0]


def count() -> None:
    while True:
        gevent.sleep(0.01)
        ticks[0] += 1


def main() -> None:
    counter = gevent.spawn(count)
    client = McpClient()
    target = Target(command=("mcp-server-time", "--local-timezone", "UTC"))
    calls = [
        gevent.spawn(client.call_tool, target, "get_current_time", {"timezone": "UTC"})
        for _ in range(3)
    ]
    gevent.joinall(calls, timeout=60)
    counter.kill()
    client.close()
    outcomes = [bool(call.value) and not call.value["is_error"] for call in calls]
    print(json.dumps({"ok": outcomes, "ticks": ticks[0]}))


if __name__ == "__main__":
    main()
