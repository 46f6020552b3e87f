"""Configuration: defaults < YAML file < WEIR_… environment, with errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, load, node_id_from_hostname


def test_defaults() -> None:
    cfg = load(env={})
    assert cfg["gateway"]["port"] == 26500
    assert cfg["broker"]["ports"]["monitoring"] == 9600
    assert cfg["broker"]["cluster"]["partitionsCount"] == 1
    assert cfg["gateway"]["rest"]["port"] == 8080 and cfg["gateway"]["history"]["url"] == ""


def test_file_then_environment(tmp_path: Path) -> None:
    f = tmp_path / "weir.yaml"
    f.write_text("broker:\n  cluster:\n    clusterSize: 3\n    partitionsCount: 2\n  dataDir: /var/weir\n")
    cfg = load(f, env={"WEIR_BROKER_CLUSTER_PARTITIONS_COUNT": "6", "WEIR_BROKER_CLUSTER_NODE_ID": "2"})
    assert cfg["broker"]["dataDir"] == "/var/weir"
    assert cfg["broker"]["cluster"]["partitionsCount"] == 6
    assert cfg["broker"]["cluster"]["nodeId"] == 2
    assert cfg["broker"]["cluster"]["clusterSize"] == 3


def test_lists_booleans_and_exporters_from_environment() -> None:
    cfg = load(
        env={
            "WEIR_GATEWAY_CONTACT_POINTS": "a:26501, b:26501",
            "WEIR_BROKER_EMBEDDED_GATEWAY": "true",
            "WEIR_BROKER_EXPORTERS_ELASTICSEARCH_CLASSNAME": "exporters.elasticsearch.ElasticsearchExporter",
            "WEIR_BROKER_EXPORTERS_ELASTICSEARCH_ARGS_URL": "http://127.0.0.1:9200",
            "WEIR_BROKER_EXPORTERS_ELASTICSEARCH_ARGS_BULK_SIZE": "500",
        }
    )
    assert cfg["gateway"]["contactPoints"] == ["a:26501", "b:26501"]
    assert cfg["broker"]["embeddedGateway"] is True
    es = cfg["broker"]["exporters"]["elasticsearch"]
    assert es["className"] == "exporters.elasticsearch.ElasticsearchExporter"
    assert es["args"] == {"url": "http://127.0.0.1:9200", "bulkSize": 500}


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"WEIR_BROKER_CLUSTER_NODE_ID": "x"}, "broker.cluster.nodeId"),
        ({"WEIR_BROKER_CLUSTER_NODE_ID": "3"}, "broker.cluster.nodeId"),
        ({"WEIR_BROKER_CLUSTER_REPLICATION_FACTOR": "2"}, "broker.cluster.replicationFactor"),
        ({"WEIR_BROKER_PORTS_COMMAND": "70000"}, "broker.ports.command"),
        ({"WEIR_LOGGING_FORMAT": "xml"}, "logging.format"),
        ({"WEIR_BROKER_EMBEDDED_GATEWAY": "maybe"}, "broker.embeddedGateway"),
        ({"WEIR_GATEWAY_REST_PORT": "70000"}, "gateway.rest.port"),
        ({"WEIR_GATEWAY_REST_PORT": "-2"}, "gateway.rest.port"),
        ({"WEIR_GATEWAY_HISTORY_URL": "mysql://db/weir"}, "gateway.history.url"),
    ],
)
def test_bad_values_name_the_key(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load(env=env)


def test_unknown_keys_and_bad_files(tmp_path: Path) -> None:
    f = tmp_path / "weir.yaml"
    f.write_text("broker:\n  clusterr: {}\n")
    with pytest.raises(ConfigError, match=r"broker\.clusterr: unknown"):
        load(f, env={})
    f.write_text("broker: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(f, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.yaml", env={})


def test_node_id_from_statefulset_pod_name() -> None:
    assert node_id_from_hostname("weir-broker-2") == 2
    assert node_id_from_hostname("weir-broker") is None
    cfg = load(env={"WEIR_NODE_ID_FROM_HOSTNAME": "1", "HOSTNAME": "weir-broker-0"})
    assert cfg["broker"]["cluster"]["nodeId"] == 0


def test_exporter_secrets_stay_text() -> None:
    cfg = load(
        env={
            "WEIR_BROKER_EXPORTERS_ES_CLASSNAME": "exporters.elasticsearch.ElasticsearchExporter",
            "WEIR_BROKER_EXPORTERS_ES_ARGS_PASSWORD": "12345",
            "WEIR_BROKER_EXPORTERS_ES_ARGS_USERNAME": "yes",
            "WEIR_BROKER_EXPORTERS_ES_ARGS_BULK_DELAY": "0.5",
        }
    )
    assert cfg["broker"]["exporters"]["es"]["args"] == {"password": "12345", "username": "yes", "bulkDelay": 0.5}


def test_json_log_lines_carry_the_partition() -> None:
    import io
    import json
    import logging

    from broker.logs import JsonFormatter, PartitionLog

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("weir.test-json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    PartitionLog(logger, 3).info("hello %s", "x", extra={"key": 7, "position": 9})
    line = json.loads(stream.getvalue())
    assert (line["message"], line["partition"], line["key"], line["position"]) == ("hello x", 3, 7, 9)
