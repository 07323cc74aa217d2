"""ruff, mypy and the architecture contracts are part of the suite."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORM_LIBS = {"discord", "slack_bolt", "slack_sdk"}
NOT_IN_TOWN = PLATFORM_LIBS | {"standins"}  # the stand-ins may use the town, never the reverse


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_applied() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_architecture_contracts_hold() -> None:
    """import-linter (pyproject.toml): the layers, the town free of platforms, no cycles."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_town_never_imports_a_platform_library_or_a_stand_in() -> None:
    offenders = []
    for path in (ROOT / "town").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in NOT_IN_TOWN]
    assert offenders == []


def test_network_guard_blocks_other_hosts() -> None:
    import socket

    import pytest

    from tests.conftest import NetworkBlocked

    with socket.socket() as sock, pytest.raises(NetworkBlocked):
        sock.connect(("93.184.216.34", 80))
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("example.org", 443)
