"""The deployment files of deploy/: the systemd unit's keys, the compose file's services, and
the image built and run where a container engine answers (else skipped, saying why)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
ROOT = DEPLOY.parent


def unit_keys(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit's sections and keys (a key may repeat: every value kept, in order)."""
    sections: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {raw!r}"
        section.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_systemd_unit_restarts_on_failure_and_keeps_its_data_in_its_state_dir() -> None:
    unit = unit_keys(DEPLOY / "bottown.service")
    service = unit["Service"]
    assert service["Restart"] == ["on-failure"] and service["KillSignal"] == ["SIGTERM"]
    assert service["StateDirectory"] == ["bottown"]
    assert "BOTTOWN_DATA_DIR=%S/bottown" in service["Environment"]  # /var/lib/bottown
    assert service["ExecStart"][0].endswith("/.venv/bin/bottown run")
    assert service["User"] != ["root"] and service["NoNewPrivileges"] == ["yes"]
    assert float(service["TimeoutStopSec"][0]) > 30  # a worker gives its leases back first
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert set(unit) == {"Unit", "Service", "Install"}


def test_the_compose_file_runs_postgres_chroma_two_workers_and_the_web_town() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed here")
    compose: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "chroma", "worker-1", "worker-2", "web"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["chroma"]["command"][:2] == ["chroma", "run"]
    for name in ("worker-1", "worker-2", "web"):
        service = services[name]
        env = service["environment"]
        assert env["BOTTOWN_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["BOTTOWN_CHROMA_URL"] == "http://chroma:8000"
        assert service["command"][:4] == ["bottown", "worker", "--name", name]
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "9100/healthz" in " ".join(service["healthcheck"]["test"])
        context = (DEPLOY / service["build"]["context"]).resolve()  # beside compose.yaml
        assert context == ROOT and (context / service["build"]["dockerfile"]).is_file()
    assert services["web"]["command"][-4:] == ["--towns", "smallville", "--platform", "web"]
    assert services["web"]["ports"] == ["127.0.0.1:8765:8765"]
    assert set(compose["volumes"]) == {"postgres-data", "chroma-data"}


def test_the_dockerfile_syncs_the_lock_as_a_user_without_privileges() -> None:
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text().splitlines()]
    steps = [line for line in lines if line and not line.startswith("#")]
    user = next(i for i, line in enumerate(steps) if line.startswith("USER "))
    sync = next(i for i, line in enumerate(steps) if "uv sync" in line)
    assert steps[user] == "USER bottown" and user < sync
    assert "uv sync --locked --no-dev --all-extras" in steps[sync]
    assert 'VOLUME ["/data"]' in steps and "BOTTOWN_DATA_DIR=/data \\" in steps
    assert steps[-1] == 'CMD ["bottown", "run"]'
    assert not any("make" in line.split() for line in steps)


def container_engine() -> str:
    """podman or docker, if one is installed and its service answers; else skip, saying why."""
    tried = []
    for name in ("podman", "docker"):
        if shutil.which(name) is None:
            tried.append(f"{name} is not installed")
            continue
        try:
            done = subprocess.run([name, "info"], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            tried.append(f"`{name} info` did not answer in 60 s")
            continue
        if done.returncode == 0:
            return name
        why = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        tried.append(f"`{name} info` failed: {why}")
    pytest.skip("no container engine answers here: " + "; ".join(tried))


def test_the_image_builds_serves_the_web_town_and_stops_on_sigterm() -> None:
    engine = container_engine()
    tag = "bottown:test"
    build = [engine, "build", "-f", str(DEPLOY / "Dockerfile"), "-t", tag, str(ROOT)]
    subprocess.run(build, check=True, timeout=1800)
    port = free_port()
    run = [engine, "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8765", tag]
    container = subprocess.run(run, check=True, capture_output=True, text=True).stdout.strip()
    try:
        said = ""
        for _ in range(300):  # the town is founded first (a minute, say)
            url = f"http://127.0.0.1:{port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
                said = answer.read().decode()
                break
            time.sleep(1)
        assert '"status": "ok"' in said and "smallville" in said
        uid = subprocess.run(
            [engine, "exec", container, "id", "-u"], check=True, capture_output=True, text=True
        )
        assert uid.stdout.strip() != "0"
        stop = subprocess.run([engine, "stop", "-t", "40", container], timeout=60)
        assert stop.returncode == 0
    finally:
        subprocess.run([engine, "rm", "-f", container], capture_output=True)
