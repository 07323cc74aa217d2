"""The rating page of ``bottown eval rate``: one question at a time, the conditions' answers
anonymised and shuffled; the rater orders them and submits; each ranking is appended to the run
folder at once (a rater who closes the page halfway keeps what was submitted). Served on
127.0.0.1 only, from ``bot/eval_ui/static`` (no outside resources); the page writes every text
with ``textContent``."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from town.experiments.believability import (
    InterviewAnswer,
    Rating,
    append_ranking,
    items,
    read_answers,
    read_rankings,
    table_as_data,
    trueskill_table,
)
from town.text import NAME_LIMIT

STATIC = Path(__file__).parent / "static"
PAGES = {
    "/": ("index.html", "text/html"),
    "/rate.js": ("rate.js", "text/javascript"),
    "/rate.css": ("rate.css", "text/css"),
}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class RatingSession:
    """The run being rated: its answers, the conditions, the anonymised questions handed out."""

    folder: Path
    answers: dict[str, list[InterviewAnswer]] = field(default_factory=dict)
    conditions: list[str] = field(default_factory=list)
    served: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.SystemRandom)

    @classmethod
    def open(cls, folder: Path) -> RatingSession:
        answers = read_answers(folder)
        conditions = list(dict.fromkeys(a.condition for a in answers))
        return cls(folder, items(answers), conditions)

    def table(self) -> list[Rating]:
        rankings, _bad = read_rankings(self.folder)
        return trueskill_table(rankings, self.conditions)

    def next_for(self, rater: str) -> dict[str, Any]:
        rankings, _bad = read_rankings(self.folder)
        done = {r.item for r in rankings if r.rater == rater}
        left = [key for key in self.answers if key not in done]
        if not left:
            return {"done": True, "left": 0, "total": len(self.answers)}
        key = left[0]
        group = list(self.answers[key])
        self.rng.shuffle(group)
        labels = {f"{i + 1}": a.condition for i, a in enumerate(group)}
        token = secrets.token_urlsafe(12)
        self.served[token] = (key, labels)
        first = group[0]
        return {
            "done": False,
            "token": token,
            "resident": first.resident,
            "category": first.category,
            "question": first.question,
            "answers": [{"id": f"{i + 1}", "text": a.answer} for i, a in enumerate(group)],
            "left": len(left),
            "total": len(self.answers),
        }

    def rank(self, token: str, order: list[str], rater: str) -> None:
        if token not in self.served:
            raise BadRequest(409, "this question is no longer open; reload the page")
        key, labels = self.served[token]
        if sorted(order) != sorted(labels):
            raise BadRequest(400, "rank every answer exactly once")
        append_ranking(self.folder, key, [labels[i] for i in order], rater)
        del self.served[token]


def _rater(value: Any) -> str:
    name = " ".join(str(value or "").split())[:NAME_LIMIT]
    if not name:
        raise BadRequest(400, "give your name (or any label) as rater")
    return name


def build_app(session: RatingSession) -> web.Application:
    async def static(request: web.Request) -> web.Response:
        name, kind = PAGES[request.path]
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if kind == "text/html":
            headers |= {"Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"}
        body = (STATIC / name).read_text(encoding="utf-8")
        return web.Response(text=body, content_type=kind, charset="utf-8", headers=headers)

    def ratings() -> dict[str, Any]:
        rankings, bad = read_rankings(session.folder)
        table = trueskill_table(rankings, session.conditions)
        return {"table": table_as_data(table), "rankings": len(rankings), "unreadable": bad}

    async def next_question(request: web.Request) -> web.Response:
        try:
            return web.json_response(session.next_for(_rater(request.query.get("rater"))))
        except BadRequest as error:
            return web.json_response({"error": error.message}, status=error.status)

    async def rank(request: web.Request) -> web.Response:
        try:
            try:
                body = await request.json()
            except ValueError:
                raise BadRequest(400, "send the ranking as JSON") from None
            if not isinstance(body, dict) or not isinstance(body.get("order"), list):
                raise BadRequest(400, "send {token, order, rater}")
            order = [str(x) for x in body["order"]]
            session.rank(str(body.get("token", "")), order, _rater(body.get("rater")))
        except BadRequest as error:
            return web.json_response({"error": error.message}, status=error.status)
        return web.json_response(ratings())

    async def show_ratings(_request: web.Request) -> web.Response:
        return web.json_response(ratings())

    app = web.Application(client_max_size=64 * 1024)
    for path in PAGES:
        app.router.add_get(path, static)
    app.router.add_get("/api/next", next_question)
    app.router.add_post("/api/rank", rank)
    app.router.add_get("/api/ratings", show_ratings)
    return app


async def start(session: RatingSession, port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve the page on 127.0.0.1; the runner (to clean up) and the page's address."""
    runner = web.AppRunner(build_app(session), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = int(runner.addresses[0][1])  # the port chosen when port is 0
    return runner, f"http://127.0.0.1:{bound}/"
