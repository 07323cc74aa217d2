"""The page's views of the town beyond its channels: the map, a resident's card, and the town's
recorded run (``/replay``)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from adapters.core.ports import TownPort
from adapters.web.replay import ReplayError, read_replay, town_replay
from adapters.web.requests import BadInput
from adapters.web.townmap import card_json, layout, map_json
from town.text import NAME_LIMIT


class TownViews:
    def __init__(self, town: TownPort, data_dir: Path | None) -> None:
        self.town = town
        self.data_dir = data_dir

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/api/map", self._map)
        app.router.add_get("/api/resident", self._resident)
        app.router.add_get("/api/replay", self._replay)

    def replay_path(self) -> Path | None:
        return town_replay(self.data_dir, self.town.town_name)

    async def avatar(self, name: str) -> str:
        """A resident's own emoji ("" for a name that is none)."""
        seen = await self.town.town_map()
        return next((r.avatar for r in seen.residents if r.name == name), "")

    async def _map(self, request: web.Request) -> web.Response:
        return web.json_response(map_json(await self.town.town_map()))

    async def _resident(self, request: web.Request) -> web.Response:
        name = request.query.get("name", "").strip()
        if not name or len(name) > NAME_LIMIT:
            raise BadInput(400, "which resident? give ?name= (a full or first name)")
        try:
            card = await self.town.resident_card(name)
        except LookupError as exc:
            raise BadInput(404, str(exc).strip("'\"")) from exc
        return web.json_response(card_json(card))

    async def _replay(self, request: web.Request) -> web.Response:
        path = self.replay_path()
        if path is None:
            raise BadInput(404, "this town has no recorded run yet (`bottown simulate` writes one)")
        try:
            replay = read_replay(path)
        except ReplayError as exc:
            raise BadInput(404, str(exc)) from exc
        seen = await self.town.town_map()
        avatars = {r.name: r.avatar for r in seen.residents}
        return web.json_response(replay.as_json(self.town.town_name, layout(seen.places), avatars))
