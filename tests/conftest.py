"""Shared fixtures. Every test runs with the network closed to anything but loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from standins.llm.server import running

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkBlocked(RuntimeError):
    """A test tried to reach a host that is not this machine."""


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # a unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise NetworkBlocked(f"tests may only connect to loopback, not {address!r}")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise NetworkBlocked(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name not in (None, "localhost") and not _is_local((name, 0)):
        raise NetworkBlocked(f"tests may only resolve loopback names, not {name!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _guarded_getaddrinfo


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test sees the developer's settings, keys or proxies; each works in its own folder."""
    import os

    for key in list(os.environ):
        if key.startswith("BOTTOWN_") or key.upper() in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        ):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture
def fake_llm(request: pytest.FixtureRequest) -> Iterator[str]:
    """The fake OpenAI-compatible server on loopback, in a thread of its own (a test's
    ``@pytest.mark.parametrize("fake_llm", [{...}], indirect=True)`` gives its options)."""
    options: dict[str, Any] = getattr(request, "param", {})
    ready: list[str] = []
    stop = threading.Event()

    async def serve() -> None:
        async with running(**options) as url:
            ready.append(url)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    for _ in range(500):
        if ready:
            break
        threading.Event().wait(0.01)
    yield ready[0]
    stop.set()
    thread.join(5)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A fresh SQLite store (migrated) in the test's folder."""
    from town.store.db import Store

    opened = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    yield opened
    opened.dispose()


@pytest.fixture
def town_factory(store: Any) -> Callable[..., Any]:
    """Bare towns in ``store``: ``town_factory(name, clock)``, a Town row with its id."""
    from tests.factories import T0, add_town

    made = itertools.count(1)

    def make(name: str = "", clock: datetime = T0) -> Any:
        with store.session() as s:
            return add_town(s, name or f"t{next(made)}", clock)

    return make


@pytest.fixture
def resident_factory(store: Any) -> Callable[..., Any]:
    """Residents in ``store``: ``resident_factory(name, town_id, **fields)``, a Resident row of
    that town (of a new town of its own if none is given)."""
    from tests.factories import add_resident, add_town

    made = itertools.count(1)

    def make(name: str = "Isabella Rodriguez", town_id: int | None = None, **fields: Any) -> Any:
        with store.session() as s:
            if town_id is None:
                town_id = add_town(s, f"home {next(made)}").id
            return add_resident(s, town_id or 0, name, **fields)

    return make


@pytest.fixture
async def engine(store: Any) -> Any:
    """The three-resident town founded in ``store`` with a ScriptedBrain: its engine, not
    ticked yet."""
    from tests.factories import make_engine

    return await make_engine(store)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Any]:
    """A live three-resident town (offline brain, hash embedder) as the adapters see it: a
    ``bot.runtime.run.TownRuntime``. Nothing ticks unless the test ticks
    ``runtime.opened.engine``."""
    from bot.runtime.settings import load_settings
    from tests.factories import open_runtime

    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hash", brain="offline", admins=["web:root"]
    )
    town = await open_runtime(settings)
    yield town
    town.opened.services.close()
