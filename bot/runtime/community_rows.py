"""The ``Community`` rows of one platform: a Discord server's or a Slack workspace's town, by
the community's key (the server's or the workspace's id), and the free name a new town takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import col, func, select

from town.store.db import Store
from town.store.models import Community, Town


@dataclass(frozen=True)
class CommunityRows:
    store: Store
    platform: str

    def get(self, key: str) -> Community | None:
        with self.store.session() as s:
            row = s.exec(
                select(Community).where(Community.platform == self.platform, Community.key == key)
            ).first()
            if row is not None:
                s.expunge(row)
            return row

    def by_town(self, town_id: int) -> Community:
        with self.store.session() as s:
            row = s.exec(select(Community).where(Community.town_id == town_id)).one()
            s.expunge(row)
            return row

    def present(self) -> list[str]:
        """The keys of the communities whose town is not paused."""
        with self.store.session() as s:
            return list(
                s.exec(
                    select(Community.key).where(
                        Community.platform == self.platform, col(Community.removed_at).is_(None)
                    )
                ).all()
            )

    def add(self, key: str, name: str, town_id: int, settings: dict[str, Any]) -> Community:
        row = Community(
            platform=self.platform, key=key, name=name, town_id=town_id, settings=settings
        )
        with self.store.session() as s:
            s.add(row)
            s.flush()
            s.refresh(row)
            s.expunge(row)
        return row

    def save(self, row: Community, **changes: object) -> None:
        with self.store.session() as s:
            stored = s.get(Community, row.id)
            assert stored is not None
            for key, value in changes.items():
                setattr(stored, key, value)
                setattr(row, key, value)
            s.add(stored)

    def town_name(self, row: Community) -> str:
        with self.store.session() as s:
            town = s.get(Town, row.town_id)
            assert town is not None, f"the community {row.key}'s town is gone"
            return town.name

    def free_name(self, name: str, home: str, key: str, founding: set[str]) -> str:
        """The town's stored name: the persona's own while free, else with the community's
        (``founding``: the lowered names of towns being founded meanwhile)."""
        with self.store.session() as s:
            for candidate in (name, f"{name} ({home})"[:80], f"{name} {key}"):
                taken = s.exec(select(Town).where(func.lower(Town.name) == candidate.lower()))
                if candidate.lower() not in founding and taken.first() is None:
                    return candidate
        raise ValueError(f"no free name for the town of {home!r}")
