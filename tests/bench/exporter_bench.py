"""Exported records per second to a real Elasticsearch-compatible server (noida-db on 127.0.0.1).

Run: ``.venv/bin/python tests/bench/exporter_bench.py [--records 20000] [--runs 3] [--bulk-size 1000]``.
A partition log is filled with real Weir records (deploy, create instances, activate and complete jobs), then the
Elasticsearch exporter runs through the exporter director with every record type enabled; each run exports the
whole log into a fresh index prefix, from start until the last position is acknowledged. Prints the median.
Also prints the JSON-lines exporter's rate on the same records, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.record import Record
from broker.stream.partition import Partition, PartitionConfig
from exporters import ExporterDirector
from tests.exporters.conftest import NoidaServer
from tests.exporters.memory import RecordLog
from tests.exporters.scenario import PartitionDriver, read_log


async def make_records(directory: Path, wanted: int) -> list[Record]:
    """Run one-task instances to completion until the log holds at least ``wanted`` records."""
    partition = Partition(directory, PartitionConfig(checker_interval_s=0.05))
    partition.open()
    partition.start()
    d = PartitionDriver(partition)
    try:
        await d.deploy("one-task.bpmn")
        while partition.log_storage is not None and partition.log_storage.last_position < wanted:
            await asyncio.gather(*(d.create("one-task", {"n": i, "tags": ["a", "b"]}) for i in range(200)))
            await d.settle()
            for job in await d.activate("test", 200):
                partition.execute(*_complete(job))
            await d.settle()
    finally:
        await partition.close(snapshot=False)
    return list(read_log(directory / "log"))


def _complete(job_key: int):  # type: ignore[no-untyped-def]
    from broker.protocol.enums import JobIntent, ValueType

    return ValueType.JOB, JobIntent.COMPLETE, {"variables": {"done": True}}, job_key


async def export_once(records: list[Record], exporter: dict, timeout: float = 300) -> float:
    log = RecordLog()
    for i in range(0, len(records), 500):
        log.append(records[i : i + 500])
    director = ExporterDirector(1, {"bench": exporter}, read_records=log.read_records, positions={})
    started = time.perf_counter()
    await director.start()
    director.notify_committed(records[-1].position)
    deadline = started + timeout
    while director.positions()["bench"] < records[-1].position:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"export did not finish in {timeout}s")
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    await director.close()
    return len(records) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bulk-size", type=int, default=1000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="weir-exporter-bench-") as tmp:
        root = Path(tmp)
        records = asyncio.run(make_records(root / "partition", options.records))
        print(f"{len(records)} records from a real partition log")
        server = NoidaServer(root / "noida")
        server.start()
        try:
            es_rates = []
            for run in range(options.runs):
                args = {
                    "url": server.url,
                    "indexPrefix": f"bench{run}",
                    "bulkSize": options.bulk_size,
                    "bulkDelay": 0.2,
                    "command": True,
                    "rejection": True,
                }
                exporter = {"className": "exporters.elasticsearch.ElasticsearchExporter", "args": args}
                es_rates.append(asyncio.run(export_once(records, exporter)))
                print(f"  elasticsearch run {run + 1}: {es_rates[-1]:,.0f} records/s")
            print(f"elasticsearch exporter: {statistics.median(es_rates):,.0f} records/s (median of {options.runs})")
        finally:
            server.stop()
        file_rates = []
        for run in range(options.runs):
            args = {"directory": str(root / f"jsonl{run}"), "flushDelay": 0.2}
            exporter = {"className": "exporters.jsonl.JsonLinesExporter", "args": args}
            file_rates.append(asyncio.run(export_once(records, exporter)))
        print(f"json-lines exporter: {statistics.median(file_rates):,.0f} records/s (median of {options.runs})")


if __name__ == "__main__":
    main()
