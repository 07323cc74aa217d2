"""A recorded simulation (``data/replays/*.jsonl``, one town event a line) as the page's replay:
each event with the area it leaves a resident in and the message its channel showed, for the
page to rebuild the map and the channels at any moment of the timeline."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from adapters.core.text import render
from adapters.web.pages import add_pages
from adapters.web.requests import url_host
from adapters.web.townmap import layout
from town.outbox.replays import replay_parts
from town.views.card import MapPlace
from town.world.places import World

ACTIONS = ("action", "reacted", "woke", "slept", "said")


class ReplayError(ValueError):
    """A replay file that cannot be shown."""


@dataclass
class Replay:
    """The events of one recorded run, oldest first, as the page plays them."""

    events: list[dict[str, Any]] = field(default_factory=list)
    areas: list[str] = field(default_factory=list)  # channels in order of first appearance
    residents: list[str] = field(default_factory=list)
    skipped: int = 0  # lines that were not town events

    def as_json(self, name: str, places: list[dict[str, Any]], avatars: dict[str, str]) -> Any:
        return {
            "name": name,
            "places": places,
            "avatars": avatars,
            "residents": self.residents,
            "events": self.events,
        }


def town_replay(data_dir: Path | None, town: str) -> Path | None:
    """The replay a town's runs write: ``bottown simulate``'s, else the demo's."""
    if data_dir is None:
        return None
    for path in (data_dir / "replays" / f"{town}.jsonl", data_dir / "replay.jsonl"):
        if path.is_file():
            return path
    return None


def _lines(part: Path) -> list[str]:
    return part.read_text(encoding="utf-8").splitlines()


def read_replay(path: Path) -> Replay:
    """Every town event of ``path`` and its past days' files (``town.outbox.replays``); lines
    that are not one are counted and left out."""
    try:
        lines = [line for part in replay_parts(path) or [path] for line in _lines(part)]
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayError(f"cannot read the replay {path}: {exc}") from exc
    replay = Replay()
    for line in lines:
        if not line.strip():
            continue
        event = _event(line)
        if event is None:
            replay.skipped += 1
            continue
        replay.events.append(event)
        if event["area"] not in replay.areas:
            replay.areas.append(event["area"])
        if event["resident"] and event["resident"] not in replay.residents:
            replay.residents.append(event["resident"])
    if not replay.events:
        raise ReplayError(f"{path} holds no town events (one JSON event a line)")
    replay.events.sort(key=lambda e: e["at"])  # stable: one tick's events keep their order
    return replay


def _event(line: str) -> dict[str, Any] | None:
    try:
        raw = json.loads(line)
        at = datetime.fromisoformat(raw["at"])
        kind, area = str(raw["kind"]), str(raw["channel"])
    except (ValueError, KeyError, TypeError):
        return None
    resident = str(raw.get("resident", ""))
    event: dict[str, Any] = {
        "at": at.isoformat(),
        "ms": int(at.timestamp() * 1000),
        "clock": f"{at:%H:%M}",
        "kind": kind,
        "area": area,
        "resident": resident,
        "emoji": str(raw.get("emoji", "")),
    }
    if kind == "moved" and isinstance(raw.get("to"), str):
        event["area"] = World.area_of(raw["to"])  # where the move leaves the resident
    if kind in ACTIONS and resident:
        event["action"] = _action(kind, resident, str(raw.get("text", "")))
    shown = render(kind, raw) if kind != "notice" else None  # a notice was for one visitor
    if shown is not None:
        author, text, _ = shown
        event["shown"] = {"author": author, "text": text, "channel": area}
    return event


def _action(kind: str, resident: str, text: str) -> str:
    if kind == "said":
        return "talking"
    if kind == "slept":
        return "asleep"
    prefix = f"{resident} is "
    return text[len(prefix) :] if text.startswith(prefix) else text


class ReplayPage:
    """``bottown replay``: the page on its own, playing one replay file (no town runs)."""

    def __init__(
        self,
        replay: Replay,
        name: str,
        places: list[MapPlace],
        avatars: dict[str, str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        known = {p.name for p in places}
        loose = [MapPlace(area, "", None) for area in replay.areas if area not in known]
        self.data = replay.as_json(name, layout([*places, *loose]), avatars)
        self.host, self.tcp_port = host, port
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        add_pages(app)
        app.router.add_get("/api/town", self._town)
        app.router.add_get("/api/replay", self._replay)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.tcp_port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.url = f"http://{url_host(self.host)}:{runner.addresses[0][1]}/replay"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _town(self, request: web.Request) -> web.Response:
        areas = [p["name"] for p in self.data["places"]]
        return web.json_response(
            {"name": self.data["name"], "areas": areas, "live": False, "replay": True}
        )

    async def _replay(self, request: web.Request) -> web.Response:
        return web.json_response(self.data)
