"""SIGTERM, as Kubernetes sends it during a rolling restart, loses nothing that was acknowledged.

Clients keep creating instances and completing jobs while the broker is stopped with SIGTERM and started again,
several times; the broker must exit cleanly (code 0) each time, and afterwards its log holds every acknowledged
create and completion.
"""

import signal
import time
from pathlib import Path

from pyzeebe.proto import gateway_pb2

from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RecordType, ValueType
from broker.tools.inspect import iter_records
from tests.harness import BPMN, WeirProcess
from tests.integration.test_crash import Load

RESTARTS = 3


def test_sigterm_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    weir = WeirProcess(tmp_path / "data", extra_args=["--no-exporter"])
    weir.start()
    load = Load(weir.address)
    resource = gateway_pb2.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
    load.stub.DeployResource(gateway_pb2.DeployResourceRequest(resources=[resource]), timeout=10)
    try:
        load.start()
        exit_codes = []
        for _ in range(RESTARTS):
            time.sleep(1.5)
            weir.kill(signal.SIGTERM)
            assert weir.proc is not None
            exit_codes.append(weir.proc.returncode)
            time.sleep(0.3)
            weir.start()
        time.sleep(1.0)
    finally:
        load.finish()
        final = weir.stop()
    assert exit_codes == [0] * RESTARTS and final == 0, weir.log()[-3000:]
    assert len(load.created) > 50, f"too little load to mean anything: {len(load.created)} creates"

    instances, completed = set(), set()
    for rec in iter_records(tmp_path / "data" / "partitions" / "1"):
        if rec.record_type != RecordType.EVENT:
            continue
        if rec.value_type == ValueType.PROCESS_INSTANCE and rec.intent == ProcessInstanceIntent.ELEMENT_ACTIVATING:
            instances.add(rec.key)
        elif rec.value_type == ValueType.JOB and rec.intent == JobIntent.COMPLETED:
            completed.add(rec.key)
    assert set(load.created) <= instances, f"lost instances: {sorted(set(load.created) - instances)[:10]}"
    assert set(load.completed) <= completed, f"lost completions: {sorted(set(load.completed) - completed)[:10]}"
