"""R5 — the leader cut off from the other brokers — run inside the test's own network namespaces (as root).

The test builds one "client" namespace holding a bridge (10.77.0.2) and one namespace per broker (10.77.0.11–13)
joined to it by veth pairs; the gateway, this driver and its load run in the client namespace. Cutting the leader
off is taking its veth port on the bridge down; healing is bringing it up. Nothing leaves the namespaces the test
made. Prints one JSON line with the results; exits non-zero on a failed check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.cluster.audit import Load, audit, deploy_one_task, divergence, read_replica_logs
from tests.cluster.harness import Cluster

HOSTS = ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
ISOLATION_S = 8.0


def link(name: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", name, state], check=True, capture_output=True)


def main(data_dir: Path, namespaces: list[str]) -> int:
    cluster = Cluster(data_dir, broker_hosts=HOSTS, broker_netns=namespaces)
    cluster.up()
    partition = 1
    results: dict = {}
    try:
        deploy_one_task(cluster)
        load = Load(cluster.gateway, creators=4, rpc_timeout_s=1.0).start()
        try:
            time.sleep(1.5)
            old = cluster.wait_leader(partition)
            cut_at = time.monotonic()
            link(f"vh{old}", "down")
            new = cluster.wait_leader(partition, exclude={old})
            results["newLeaderAfterS"] = round(time.monotonic() - cut_at, 2)
            time.sleep(max(0.0, ISOLATION_S - (time.monotonic() - cut_at)))
            healed_at = time.monotonic()
            link(f"vh{old}", "up")
            time.sleep(3.0)
        finally:
            history = load.finish()
        during = [t for t in history.acks_on(partition) if cut_at < t < healed_at]
        results.update(old=old, new=new, acksDuringIsolation=len(during), created=len(history.created))
        cluster.wait_replicas_equal(timeout=30)
        cluster.down()
        logs = read_replica_logs(cluster)
        results["divergence"] = divergence(logs)
        report = audit(history, logs, replication=3)
        results["problems"] = report.problems()
        results["summary"] = report.summary()
    finally:
        cluster.kill_everything()
    print(json.dumps(results))
    ok = not results["problems"] and not results["divergence"] and results["acksDuringIsolation"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2].split(",")))
