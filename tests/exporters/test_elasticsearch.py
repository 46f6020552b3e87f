"""The Elasticsearch exporter against a real Elasticsearch-compatible server (noida-db), with real Weir records."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.enums import RecordType, ValueType
from broker.protocol.record import Record
from exporters import ExporterConfigurationError, ExporterDirector, broker_version, es_templates
from exporters.director import build_exporter
from exporters.elasticsearch import ElasticsearchExporter, ElasticsearchSettings
from exporters.record_json import dumps, record_document
from tests.exporters.conftest import NoidaServer
from tests.exporters.memory import RecordLog
from tests.exporters.scenario import run_scenario
from tests.exporters.test_director import eventually

ES = "exporters.elasticsearch.ElasticsearchExporter"
VERSION = broker_version()
DAY = "2023-11-14"  # the scenario's clock: 1_700_000_000_000 ms


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    """Every record of a partition that deployed, ran, completed, failed and cancelled instances."""
    return asyncio.run(run_scenario(tmp_path_factory.mktemp("partition") / "1", instances=5))


def log_of(records: list[Record], block: int = 7) -> RecordLog:
    log = RecordLog()
    for i in range(0, len(records), block):
        log.append(records[i : i + block])
    return log


def director_for(log: RecordLog, args: dict[str, Any], **kwargs: Any) -> ExporterDirector:
    return ExporterDirector(
        1,
        {"es": {"className": ES, "args": args}},
        read_records=log.read_records,
        positions=kwargs.pop("positions", {}),
        retry_initial_s=0.02,
        retry_max_s=kwargs.pop("retry_max_s", 0.2),
        **kwargs,
    )


def is_default_exported(record: Record) -> bool:
    return record.record_type == RecordType.EVENT and record.value_type in es_templates.EXPORTABLE_VALUE_TYPES


async def export_all(server: NoidaServer, records: list[Record], args: dict[str, Any]) -> ExporterDirector:
    director = director_for(log_of(records), {"url": server.url, "bulkDelay": 0.05, **args})
    await director.start()
    director.notify_committed(records[-1].position)
    await eventually(lambda: director.positions()["es"] == records[-1].position, 15, "everything acknowledged")
    await director.close()
    return director


async def test_documents_land_in_zeebe_indices_with_ids_routing_and_aliases(
    noida: NoidaServer, records: list[Record]
) -> None:
    await export_all(noida, records, {"indexPrefix": "docs", "bulkSize": 10})
    expected = [r for r in records if is_default_exported(r)]
    assert len(expected) > 50
    hits = noida.search("docs_*")
    assert [h["_source"]["position"] for h in hits] == [r.position for r in expected], "every event, once"
    for hit, record in zip(hits, expected, strict=True):
        slug = es_templates.value_type_slug(record.value_type)
        assert hit["_index"] == f"docs_{slug}_{VERSION}_{DAY}"
        assert hit["_id"] == f"1-{record.position}"
        assert hit["_source"] == json.loads(dumps(record_document(record, VERSION)))
    status, doc = noida.request("GET", f"/{hits[0]['_index']}/_doc/{hits[0]['_id']}?routing=1")
    assert status == 200 and doc["_routing"] == "1"
    # Through the aliases, the way Zeebe users query
    per_type = Counter(ValueType(r.value_type) for r in expected)
    for value_type, count in per_type.items():
        assert len(noida.search(f"docs-{es_templates.value_type_slug(value_type)}")) == count
    created = noida.search(
        "docs-job", {"bool": {"must": [{"term": {"valueType": "JOB"}}, {"term": {"intent": "CREATED"}}]}}
    )
    assert len(created) == sum(1 for r in expected if r.value_type == ValueType.JOB and r.intent_enum.name == "CREATED")
    instance_key = next(r.value["processInstanceKey"] for r in expected if r.value_type == ValueType.PROCESS_INSTANCE)
    lifecycle = noida.search("docs-process-instance", {"term": {"value.processInstanceKey": instance_key}})
    assert lifecycle and all(h["_source"]["value"]["processInstanceKey"] == instance_key for h in lifecycle)
    assert {h["_source"]["intent"] for h in lifecycle} >= {"ELEMENT_ACTIVATING", "ELEMENT_ACTIVATED"}
    variables = noida.search("docs-variable", {"term": {"value.name": "order"}})
    assert variables and json.loads(variables[0]["_source"]["value"]["value"])["lines"] == [1, 2]
    evaluations = noida.search("docs-decision-evaluation")
    assert sorted(h["_source"]["intent"] for h in evaluations) == ["EVALUATED", "FAILED"]
    assert {h["_index"] for h in evaluations} == {f"docs_decision-evaluation_{VERSION}_{DAY}"}
    decisions = noida.search("docs-decision")
    assert {h["_source"]["value"]["decisionId"] for h in decisions} == {"customer_level", "discount"}
    assert [h["_source"]["value"]["formId"] for h in noida.search("docs-form")] == ["exported-form"]
    assert len(noida.search("docs-decision-requirements")) == 1
    user_tasks = noida.search("docs-user-task", {"term": {"value.elementId": "approve"}})
    assert {h["_index"] for h in user_tasks} == {f"docs_user-task_{VERSION}_{DAY}"}
    assert [h["_source"]["intent"] for h in user_tasks] == [
        "CREATING", "CREATED", "ASSIGNING", "ASSIGNED", "UPDATING", "UPDATED", "COMPLETING", "COMPLETED",
    ]  # fmt: skip
    denied = noida.search("docs-user-task", {"term": {"intent": "COMPLETION_DENIED"}})
    assert len(denied) == 1 and denied[0]["_source"]["value"]["assignee"] == "max"  # corrected by a listener


async def test_templates_are_installed_with_strict_mappings(noida: NoidaServer, records: list[Record]) -> None:
    await export_all(noida, records[:20], {"indexPrefix": "tpl"})
    status, component = noida.request("GET", "/_component_template/tpl")
    assert status == 200
    mappings = component["component_templates"][0]["component_template"]["template"]["mappings"]
    assert mappings["dynamic"] == "strict" and mappings["properties"]["position"] == {"type": "long"}
    status, templates = noida.request("GET", f"/_index_template/tpl_job_{VERSION}")
    assert status == 200
    template = templates["index_templates"][0]["index_template"]
    assert template["index_patterns"] == [f"tpl_job_{VERSION}_*"] and template["composed_of"] == ["tpl"]
    assert "tpl-job" in template["template"]["aliases"]
    assert template["template"]["mappings"]["properties"]["value"]["properties"]["customHeaders"] == {"enabled": False}
    status, aliases = noida.request("GET", "/_alias/tpl-process-instance")
    assert status == 200 and list(aliases) == [f"tpl_process-instance_{VERSION}_{DAY}"]


async def test_commands_and_rejections_fit_the_strict_mappings_too(noida: NoidaServer, records: list[Record]) -> None:
    director = await export_all(noida, records, {"indexPrefix": "all", "command": True, "rejection": True})
    assert director.containers["es"].failures == 0, "no bulk item was rejected"
    exported = [r for r in records if r.value_type in es_templates.EXPORTABLE_VALUE_TYPES]
    hits = noida.search("all_*")
    assert [h["_source"]["position"] for h in hits] == [r.position for r in exported]
    rejection = next(h["_source"] for h in hits if h["_source"]["recordType"] == "COMMAND_REJECTION")
    assert rejection["rejectionType"] == "NOT_FOUND" and rejection["rejectionReason"]


async def test_a_rejected_item_fails_the_flush_and_the_position_stays(
    noida: NoidaServer, records: list[Record]
) -> None:
    job = next(r for r in records if r.value_type == ValueType.JOB and r.record_type == RecordType.EVENT)
    bad = Record(**{**{f: getattr(job, f) for f in job.__slots__}, "value": {**job.value, "notInTheMapping": 1}})
    director = director_for(
        log_of([*records[: job.position - 1], bad]), {"url": noida.url, "indexPrefix": "bad", "bulkSize": 1}
    )
    await director.start()
    director.notify_committed(job.position)
    container = director.containers["es"]
    await eventually(lambda: container.failures >= 2, 10, "the bad document is retried")
    assert director.positions()["es"] < job.position
    await director.close()
    assert not any(h["_source"]["position"] == job.position for h in noida.search("bad_*"))


async def test_outage_loses_nothing_and_duplicates_nothing(own_noida: NoidaServer, records: list[Record]) -> None:
    expected = [r.position for r in records if is_default_exported(r)]
    log = RecordLog()
    director = director_for(
        log, {"url": own_noida.url, "indexPrefix": "out", "bulkSize": 5, "bulkDelay": 0.05, "requestTimeout": 2}
    )
    await director.start()
    third = len(records) // 3
    director.notify_committed(log.append(records[:third]))
    await eventually(lambda: director.positions()["es"] >= records[third - 1].position - 5, 10, "first third exported")

    own_noida.stop()
    # Records the exporter does not send (commands) may be acknowledged without the server once everything before
    # them was sent; the first one it does send while the server is down must not be.
    first_sent_while_down = next(r.position for r in records[third : 2 * third] if is_default_exported(r))
    for i in range(third, 2 * third, 4):
        director.notify_committed(log.append(records[i : min(i + 4, 2 * third)]))
        await asyncio.sleep(0.01)
    await eventually(lambda: director.containers["es"].failures >= 3, 10, "flushes fail while the server is down")
    await asyncio.sleep(0.3)
    assert director.positions()["es"] < first_sent_while_down, "nothing sent while down was acknowledged"

    own_noida.start()
    director.notify_committed(log.append(records[2 * third :]))
    await eventually(lambda: director.positions()["es"] == records[-1].position, 20, "caught up after the outage")
    await director.close()
    hits = own_noida.search("out_*")
    ids = [h["_id"] for h in hits]
    assert len(ids) == len(set(ids)), "no duplicate document"
    assert [h["_source"]["position"] for h in hits] == expected, "no position missing"


async def test_restart_from_an_older_position_overwrites_instead_of_duplicating(
    noida: NoidaServer, records: list[Record]
) -> None:
    await export_all(noida, records, {"indexPrefix": "again"})
    director = director_for(
        log_of(records), {"url": noida.url, "indexPrefix": "again", "bulkDelay": 0.05}, positions={"es": 10}
    )
    await director.start()
    director.notify_committed(records[-1].position)
    await eventually(lambda: director.positions()["es"] == records[-1].position, 15)
    await director.close()
    hits = noida.search("again_*")
    assert [h["_source"]["position"] for h in hits] == [r.position for r in records if is_default_exported(r)]


def test_every_field_weir_writes_is_declared_in_the_mappings(records: list[Record]) -> None:
    """Strict mappings reject undeclared fields: every value field of every record type must be mapped."""

    def undeclared(value: dict[str, Any], properties: dict[str, Any], path: str) -> list[str]:
        missing = []
        for name, item in value.items():
            mapping = properties.get(name)
            if mapping is None:
                missing.append(path + name)
            elif "properties" in mapping:
                for element in item if isinstance(item, list) else [item]:
                    if isinstance(element, dict):
                        missing += undeclared(element, mapping["properties"], f"{path}{name}.")
        return missing

    for record in records:
        if record.value_type not in es_templates.EXPORTABLE_VALUE_TYPES:
            continue
        document = record_document(record, VERSION)
        envelope = {k: v for k, v in document.items() if k != "value"}
        assert not undeclared(envelope, es_templates.RECORD_PROPERTIES, "")
        missing = undeclared(document["value"], es_templates.VALUE_PROPERTIES[record.value_type], "value.")
        assert not missing, f"{record.describe()}: undeclared {missing}"


def test_document_shape_follows_zeebe(records: list[Record]) -> None:
    deployment = next(r for r in records if r.value_type == ValueType.DEPLOYMENT and r.record_type == RecordType.EVENT)
    document = record_document(deployment, VERSION)
    assert set(document) == {
        "partitionId", "value", "key", "position", "timestamp", "recordType", "intent", "valueType",
        "rejectionType", "rejectionReason", "brokerVersion", "recordVersion", "sourceRecordPosition",
    }  # fmt: skip
    metadata = document["value"]["processesMetadata"][0]
    assert "duplicate" in metadata and "isDuplicate" not in metadata
    assert "isDuplicate" in deployment.value["processesMetadata"][0], "the record itself is not modified"
    creation = next(r for r in records if r.value_type == ValueType.PROCESS_INSTANCE_CREATION)
    assert "fetchVariables" not in record_document(creation, VERSION)["value"]
    # business ids and tags: always present in the JSON (Zeebe 8.9), though a Weir record leaves them out while empty
    instances = [r for r in records if r.value_type == ValueType.PROCESS_INSTANCE]
    labelled = [record_document(r, VERSION)["value"] for r in instances if r.value.get("businessId") == "o-0"]
    assert labelled and all(v["tags"] == ["shop:eu"] for v in labelled)
    plain = next(r for r in instances if "businessId" not in r.value)
    assert {k: record_document(plain, VERSION)["value"][k] for k in ("businessId", "tags")} == {
        "businessId": "",
        "tags": [],
    }
    assert "tags" not in plain.value, "the record itself is not modified"


def test_default_configuration_is_zeebes() -> None:
    settings = ElasticsearchSettings.from_args({})
    assert settings.index_prefix == "zeebe-record"
    assert settings.record_filter.record_types == {RecordType.EVENT}
    assert settings.record_filter.value_types == es_templates.EXPORTABLE_VALUE_TYPES
    narrowed = ElasticsearchSettings.from_args({"job": False, "command": True, "processInstance": True})
    assert ValueType.JOB not in narrowed.record_filter.value_types
    assert narrowed.record_filter.record_types == {RecordType.EVENT, RecordType.COMMAND}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"url": "localhost:9200"}, "url"),
        ({"username": "elastic"}, "username and password"),
        ({"username": "u", "password": "p", "apiKey": "k"}, "choose one"),
        ({"caFile": "/no/such/ca.pem"}, "caFile"),
        ({"indexPrefix": "Zeebe Record"}, "indexPrefix"),
        ({"bulkSize": 0}, "bulkSize"),
        ({"bulkDelay": "soon"}, "bulkDelay"),
        ({"verifyTls": "false"}, "verifyTls"),
        ({"retentionMinimumAge": "a month"}, "retentionMinimumAge"),
        ({"event": False}, "nothing to export"),
        ({"messageSubscription": True}, "unknown configuration key"),
    ],
)
def test_bad_configuration_fails_fast_with_the_key(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ExporterConfigurationError, match=message):
        build_exporter("es", {"className": ES, "args": args}, 1, lambda: 0)


def test_retention_installs_a_lifecycle_policy_and_references_it() -> None:
    policy = es_templates.retention_policy("7d")
    assert policy["policy"]["phases"]["delete"]["min_age"] == "7d"
    template = es_templates.index_template(
        "zeebe-record", ValueType.JOB, "1.0.0", number_of_shards=1, number_of_replicas=0, lifecycle_policy="keep-7d"
    )
    assert template["template"]["settings"]["index.lifecycle.name"] == "keep-7d"
    plain = es_templates.index_template(
        "zeebe-record", ValueType.JOB, "1.0.0", number_of_shards=1, number_of_replicas=0, lifecycle_policy=None
    )
    assert "index.lifecycle.name" not in plain["template"]["settings"]


def test_exporter_class_is_loadable_by_import_path(tmp_path: Path) -> None:
    exporter, context = build_exporter("es", {"className": ES, "args": {"apiKey": "abc"}}, 3, lambda: 0)
    assert isinstance(exporter, ElasticsearchExporter) and context.partition_id == 3
