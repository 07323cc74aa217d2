"""Which interpreter `make` builds the environment on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def chosen(*args: str, env: dict[str, str] | None = None) -> str:
    """The PYTHON the Makefile settles on, given these make arguments."""
    show = "print-python: ; @echo $(PYTHON)"
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), *args, "--eval", show, "print-python"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.strip()


def fake_python(path: Path, *, recent: bool) -> Path:
    """An executable that answers the Makefile's version check as a 3.11+ (or an older)
    interpreter would."""
    path.write_text(f"#!/bin/sh\nexit {0 if recent else 1}\n")
    path.chmod(0o755)
    return path


def test_the_system_python_is_chosen_when_it_is_recent_enough(tmp_path: Path) -> None:
    system = fake_python(tmp_path / "python3", recent=True)
    assert chosen(f"SYSTEM_PYTHON={system}") == str(system)


def test_an_old_or_missing_system_python_falls_back_to_the_path(tmp_path: Path) -> None:
    old = fake_python(tmp_path / "python3", recent=False)
    assert chosen(f"SYSTEM_PYTHON={old}") == "python3"
    assert chosen(f"SYSTEM_PYTHON={tmp_path / 'missing'}") == "python3"


def test_a_python_asked_for_wins(tmp_path: Path) -> None:
    system = fake_python(tmp_path / "python3", recent=True)
    assert chosen(f"SYSTEM_PYTHON={system}", "PYTHON=python3.12") == "python3.12"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": "python3.13"}
    assert chosen(f"SYSTEM_PYTHON={system}", env=env) == "python3.13"


def test_make_demo_never_builds_the_llm_server() -> None:
    def planned(target: str) -> str:
        return subprocess.run(
            ["make", "-n", "-B", "-C", str(ROOT), target],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert "llama" not in planned("demo")
    assert "llama-cpp-python[server]==" in planned("test")
