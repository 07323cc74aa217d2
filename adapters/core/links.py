"""Which platform channel shows which town location, kept in the store (``ChannelLink``), so
provisioning finds its channels again after a restart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import select

from town.store.db import Store
from town.store.models import ChannelLink


@dataclass(frozen=True)
class ChannelLinks:
    """One platform's links for one town."""

    store: Store
    town_id: int
    platform: str

    def load(self) -> dict[str, ChannelLink]:
        """Every stored link by area."""
        with self.store.session() as s:
            rows = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self.town_id, ChannelLink.platform == self.platform
                )
            ).all()
            return {row.area: row for row in rows}

    def save(self, area: str, channel_id: str, extra: dict[str, Any]) -> None:
        """Link ``area`` to ``channel_id`` with ``extra``; written only when it changed."""
        with self.store.session() as s:
            row = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self.town_id,
                    ChannelLink.platform == self.platform,
                    ChannelLink.area == area,
                )
            ).first()
            if row is None:
                row = ChannelLink(
                    town_id=self.town_id, platform=self.platform, area=area, channel_id=""
                )
            if row.channel_id != channel_id or row.extra != extra:
                row.channel_id, row.extra = channel_id, extra
                s.add(row)
