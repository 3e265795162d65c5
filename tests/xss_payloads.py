"""Known XSS payloads, as a model might write them, shared by the unit tests of the
Markdown renderer and the browser tests that check what a page actually runs.

Each payload is text a model could emit in a reply. None of them may produce a script,
an event handler, an htmx attribute, an active element or a dangerous URL once rendered.
"""

from __future__ import annotations

XSS_PAYLOADS: tuple[str, ...] = (
    # Raw HTML (raw HTML is off: all of it must come out as escaped text).
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '<div hx-get="/api/chats" hx-trigger="load">x</div>',
    '<button hx-on:click="alert(1)">x</button>',
    '<div data-hx-post="/api/chats" data-hx-trigger="load">x</div>',
    '<a href="https://ok.example" hx-boost="true" hx-target="body">x</a>',
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    '<iframe src="javascript:alert(1)">',
    '<iframe srcdoc="<script>alert(1)</script>">',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<details open ontoggle=alert(1)>",
    "<body onload=alert(1)>",
    '<object data="javascript:alert(1)">',
    '<embed src="javascript:alert(1)">',
    '<form action="javascript:alert(1)"><input type=submit>',
    '<form><button formaction="javascript:alert(1)">x</button></form>',
    '<a href="https://ok.example" onclick="alert(1)">x</a>',
    "<style>body{display:none}</style>",
    '<base href="https://evil.example/">',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    "<link rel=stylesheet href=https://evil.example/x.css>",
    "<scr<script>ipt>alert(1)</script>",
    '<p style="position:fixed;inset:0" id="chat-form" class="btn">x</p>',
    "<!--<img src=x onerror=alert(1)>-->",
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "<template><script>alert(1)</script></template>",
    "<textarea><script>alert(1)</script></textarea>",
    # Markdown links and images.
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript&#58;alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](<javascript:alert(1)>)",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](data:image/png;base64,iVBORw0KGgo=)",
    "[x][ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "[x](//evil.example/x)",
    '![x](x" onerror="alert(1))',
    "![x](javascript:alert(1))",
    "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "[![x](https://ok.example/i.png)](javascript:alert(1))",
    '[x](https://ok.example "title\\" onmouseover=\\"alert(1)")',
    "[<img src=x onerror=alert(1)>](https://ok.example)",
    # Code: must stay visible, escaped.
    "`<script>` in code",
    "```\n<script>alert(1)</script>\n```",
    '```x"><script>alert(1)</script>\ncode\n```',
    "```js onload=alert(1)\ncode\n```",
    # Markdown structures wrapped round raw HTML.
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | <script>alert(1)</script> |",
    "> <iframe srcdoc='<script>alert(1)</script>'>",
    "- <svg onload=alert(1)>\n- ok",
)
