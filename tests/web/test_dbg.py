from tests.web.test_fuzz_routes import world  # noqa

BIG = 2**40


def test_dbg(world):
    c, a, chat = world["client"], world["auth"], world["chat"]
    h = a.headers()
    probes = [
        ("get", f"/chats/{chat}/rows?after={10**14}", {}),
        ("get", f"/api/chats/{chat}/messages?after={BIG}", {}),
        ("post", f"/api/chats/{chat}/loop", {"json": {"regenerate": BIG}}),
        ("post", f"/api/chats/{chat}/loop", {"json": {"edit": {"sequence": BIG, "message": "x"}}}),
        ("put", f"/api/chats/{chat}/branch", {"json": {"sequence": BIG}}),
        (
            "post",
            f"/chats/{chat}/branch",
            {"data": {"sequence": str(10**14), "csrf_token": a.csrf}},
        ),
        (
            "post",
            f"/chats/{chat}/regenerate",
            {"data": {"sequence": str(10**14), "csrf_token": a.csrf}},
        ),
        (
            "post",
            f"/chats/{chat}/edit",
            {"data": {"sequence": str(10**14), "message": "x", "csrf_token": a.csrf}},
        ),
        ("get", f"/welcome/starters?conversation={10**20}", {}),
        ("get", f"/admin/usage?user={10**20}", {}),
        ("get", "/admin/usage?month=9999-99", {}),
        ("get", f"/admin/runs?user={10**20}", {}),
        ("get", f"/admin/runs?conversation={10**20}", {}),
        (
            "post",
            "/admin/users/1/allowance",
            {
                "data": {
                    "credits": str(10**20),
                    "monthly_credits": str(10**20),
                    "csrf_token": a.csrf,
                }
            },
        ),
        (
            "post",
            "/workspace/offers/new",
            {"data": {"name": "x", "price": "1", "brand_colors": "#fff", "csrf_token": a.csrf}},
        ),
        (
            "post",
            "/workspace/personas/new",
            {"data": {"name": "x", "offer_id": str(10**20), "csrf_token": a.csrf}},
        ),
        ("get", f"/workspace/outputs?offer={10**20}", {}),
        ("get", "/admin/guidelines/preview?agent=x", {}),
        ("put", "/api/admin/guidelines", {"json": {"rules": [{"id": BIG, "text": "x"}]}}),
        (
            "post",
            f"/api/chats/{chat}/loop",
            {"json": {"toolResponse": {"toolUseId": "x", "result": {}}}},
        ),
    ]
    for method, path, kw in probes:
        r = getattr(c, method)(path, headers=h, **kw)
        print(r.status_code, method, path, str(kw)[:60])
