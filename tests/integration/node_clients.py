"""Running a Node.js script against Weir with the npm clients `make node-clients` installs into .cache/node-clients."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.harness import REPO

CLIENTS = REPO / ".cache" / "node-clients" / "node_modules"

#: The end of every script: it defines ``async function main()`` that prints one JSON line; a failure exits 1 with
#: the stack, a REST client's response body and a validation's issues.
RUN_MAIN = r"""
main().then(
  () => process.exit(0),
  (e) => {
    console.error(e && (e.stack || e));
    if (e && e.response) console.error(e.response.body);
    if (e && e.issues) console.error(JSON.stringify(e.issues));
    process.exit(1);
  },
);
"""


def run_node_script(
    script: str, args: list[str], tmp_path: Path, *, env: dict[str, str] | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Runs ``script`` + RUN_MAIN with ``args``; the JSON its last line printed. No ZEEBE_*/CAMUNDA_* variable of
    this environment reaches it (nothing may point the client elsewhere), only those of ``env``."""
    node = shutil.which("node")
    assert node is not None, "node is required for the Node.js client tests"
    path = tmp_path / "client.js"
    path.write_text(script + RUN_MAIN)
    scrubbed = {name: value for name, value in os.environ.items() if not name.startswith(("ZEEBE_", "CAMUNDA_"))}
    full_env = {**scrubbed, "NODE_PATH": str(CLIENTS), **(env or {})}
    done = subprocess.run(
        [node, str(path), *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=tmp_path
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
