"""Shared fixtures. Every test runs with the network closed to anything but loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import AsyncIterator, Iterator
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
def fake_llm() -> Iterator[str]:
    """The fake OpenAI-compatible server on loopback, in a thread of its own."""
    ready: list[str] = []
    stop = threading.Event()

    async def serve() -> None:
        async with running() as url:
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


MINITOWN = Path(__file__).parent / "data" / "minitown"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A fresh SQLite store (migrated) in the test's folder."""
    from town.store.db import Store

    opened = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    yield opened
    opened.dispose()


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Any]:
    """A live three-resident town (offline brain, hash embedder) as the adapters see it: a
    ``bot.runtime.run.TownRuntime``. Nothing ticks unless the test ticks
    ``runtime.opened.engine``."""
    from bot.runtime.run import TownRuntime
    from bot.runtime.settings import load_settings
    from bot.runtime.towns import open_town
    from town.memory.vectors import ChromaIndex

    ChromaIndex.release_all()
    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hash", brain="offline", admins=["web:root"]
    )
    opened = await open_town(settings, "mini", persona=str(MINITOWN), create=True)
    town = TownRuntime(opened, settings)
    yield town
    opened.services.close()
