"""@camunda8/orchestration-cluster-api 8.8, the version @camunda8/sdk 8.8 brings along (nested under it in
.cache/node-clients), keeps working against Weir's 8.9 shapes: the 9.x client's end-to-end scenario runs unchanged
through it with the 8.8 client's default validation.

With its response validation on, the 8.8 client refuses what Camunda 8.9 itself sends: it reads a null field as
absent and its spec requires fields 8.9 made nullable (``page.startCursor``, ``parentProcessInstanceKey``, the kinds
of a deployment item Weir did not deploy), and it expects ``decisionEvaluationInstanceKey`` to be a number where
Camunda writes ``<key>-<n>``. So this test checks behaviour, and the 9.x test (test_rest_ts_client) the shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import WeirProcess
from tests.integration import test_rest_ts_client as ts9
from tests.integration.node_clients import CLIENTS, run_node_script

PACKAGE = CLIENTS / "@camunda8" / "sdk" / "node_modules" / "@camunda8" / "orchestration-cluster-api"


def _version() -> str:
    try:
        return str(json.loads((PACKAGE / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return ""


pytestmark = pytest.mark.skipif(
    not _version().startswith("8.8."),
    reason="@camunda8/sdk 8.8 with its @camunda8/orchestration-cluster-api 8.8 not installed (run `make node-clients`)",
)

STRICT = "CAMUNDA_SDK_VALIDATION: 'req:strict,res:strict',"


def test_orchestration_cluster_api_8_8_runs_the_scenario(weir: WeirProcess, tmp_path: Path) -> None:
    assert STRICT in ts9.SCRIPT and "require('@camunda8/orchestration-cluster-api')" in ts9.SCRIPT
    script = ts9.SCRIPT.replace(STRICT, "").replace(
        "require('@camunda8/orchestration-cluster-api')", f"require({json.dumps(str(PACKAGE))})"
    )
    out = run_node_script(script, [weir.rest_url, *map(str, ts9.FILES)], tmp_path, timeout=240)
    assert out["topology"] == {"version": "8.9.0", "partitions": 1}
    assert out["created"]["variables"] == {} and out["job"]["variables"] == {"n": 1}
    assert out["searched"] == {"total": 1, "more": False}
    assert out["instance"] == {"state": "COMPLETED", "root": True}
    assert out["awaited"] == {"x": 2}
    assert out["incident"] == {"type": "JOB_NO_RETRIES", "message": "out of paper"}
    assert out["jobState"] == "COMPLETED" and out["caught"] is True
    assert out["taskHeaders"] == {"department": "sales"}
    assert out["correlated"] is True and out["published"] is True and out["variable"] == '"set"'
    assert out["decision"] == {"failed": None, "evaluated": ["customer_level", "discount"]}
    assert out["cancelled"] is True
    assert out["searches"] == dict.fromkeys(out["searches"], True) and len(out["searches"]) == 8
