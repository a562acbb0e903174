"""Editing in JupyterLab, the third way readers use the book: `make lab` serves notebooks/ through
jupytext's contents manager. Here a Jupyter server is started headless the same way, on a copy of a
chapter; the chapter is fetched through the contents API as a notebook (what Lab opens), saved back
unchanged (what Lab's save sends), and the MyST file must come back byte for byte."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import jupytext
import pytest

from negutils.config import REPO_ROOT

CHAPTER = "04_ktn.md"
TOKEN = "negbook-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port: int, path: str, method: str = "GET", body: dict | None = None) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def jupyter_server(tmp_path):
    """A headless Jupyter server with jupytext's contents manager on a copy of one chapter."""
    (tmp_path / CHAPTER).write_bytes((REPO_ROOT / "notebooks" / CHAPTER).read_bytes())
    port = free_port()
    runtime = tmp_path / "runtime"           # the server's cookie secret and connection files, not in $HOME
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
                               f"--port={port}", "--ip=127.0.0.1", f"--ServerApp.root_dir={tmp_path}",
                               f"--IdentityProvider.token={TOKEN}",
                               "--ServerApp.contents_manager_class=jupytext.TextFileContentsManager"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        deadline = time.time() + 60
        while True:
            try:
                api(port, "status")
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the Jupyter server did not start:\n{server.stdout.read()}")
                time.sleep(0.3)
        yield port, tmp_path
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_chapter_opens_as_a_notebook_and_saves_back_to_the_same_myst(jupyter_server):
    port, root = jupyter_server
    model = api(port, f"contents/{CHAPTER}?type=notebook&content=1")
    assert model["type"] == "notebook" and model["format"] == "json"
    cells = model["content"]["cells"]
    parameters = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    assert len(parameters) == 1 and 'profile = "cpu"' in parameters[0]["source"]
    assert sum(c["cell_type"] == "code" for c in cells) >= 10
    api(port, f"contents/{CHAPTER}", "PUT", {"type": "notebook", "format": "json", "content": model["content"]})
    assert (root / CHAPTER).read_bytes() == (REPO_ROOT / "notebooks" / CHAPTER).read_bytes()


def test_every_chapter_is_stable_under_jupytexts_round_trip():
    """What Lab saves is jupytext's writing of the notebook, so a chapter must already be in that form
    (cell options as a YAML block, not `:key:` lines) to come back byte for byte."""
    for path in sorted((REPO_ROOT / "notebooks").glob("*.md")):
        source = path.read_text()
        assert jupytext.writes(jupytext.reads(source, fmt="md:myst"), fmt="md:myst") == source, path.name
