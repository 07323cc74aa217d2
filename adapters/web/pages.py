"""The page's files (``adapters/web/static``: no build step, nothing fetched from elsewhere),
served with a strict content security policy."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"
SCRIPTS = ("app.js", "page.js", "feed.js", "townmap.js", "card.js", "replay.js")
PAGES = {
    "/": ("index.html", "text/html"),
    "/replay": ("index.html", "text/html"),  # the same page, playing the town's replay
    "/static/style.css": ("style.css", "text/css"),
    "/static/views.css": ("views.css", "text/css"),
    **{f"/static/{name}": (name, "text/javascript") for name in SCRIPTS},
}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def add_pages(app: web.Application) -> None:
    for path in PAGES:
        app.router.add_get(path, page)


async def page(request: web.Request) -> web.StreamResponse:
    name, kind = PAGES[request.path]
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if kind == "text/html":
        headers |= {"Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"}
    body = (STATIC / name).read_text(encoding="utf-8")
    return web.Response(text=body, content_type=kind, charset="utf-8", headers=headers)
