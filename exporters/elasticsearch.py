"""The Elasticsearch exporter: Weir's records as Zeebe's record documents, acknowledged once indexed.

- Documents have Zeebe's record JSON shape, id ``<partitionId>-<position>`` (re-exporting overwrites, so
  exporting is idempotent) and are routed by partition.
- Index per value type and day: ``<prefix>_<value-type>_<version>_<yyyy-mm-dd>`` (the UTC day of the
  record's timestamp), reachable through the alias ``<prefix>-<value-type>``. A component template (the
  envelope) and one index template per value type (strict mappings) are installed before the first bulk.
- Records are buffered and sent with ``_bulk`` when the buffer reaches ``bulkSize`` records or
  ``bulkMemoryLimit`` bytes, and every ``bulkDelay`` seconds. A request that fails, or any item in it that
  fails, fails the whole flush; the buffer is kept and sent again, and the position is acknowledged only
  after a flush fully succeeded.

HTTP goes through urllib3 on one worker thread of the exporter's own: the event loop never waits on the
network, urllib3's own retries are off (the director owns retrying, with back-off), and there is one small
dependency instead of a client library plus its transport.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import urllib3

from broker.protocol.enums import ValueType
from broker.protocol.record import Record
from exporters import es_templates
from exporters.api import (
    Context,
    Controller,
    Exporter,
    ExporterConfigurationError,
    RecordFilter,
    ScheduledTask,
    reject_unknown_keys,
    value_type_arg_name,
)
from exporters.record_json import dumps, record_document

T = TypeVar("T")

DEFAULT_INDEX_PREFIX = "zeebe-record"
_DAY_MS = 86_400_000
_INDEX_PREFIX = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_AGE = re.compile(r"^\d+(d|h|m|s|ms)$")
_RECORD_TYPE_DEFAULTS = {"event": True, "command": False, "rejection": False}
_VALUE_TYPE_ARGS = {value_type_arg_name(vt): vt for vt in es_templates.EXPORTABLE_VALUE_TYPES}

_DEFAULTS: dict[str, Any] = {
    "url": "http://localhost:9200",
    "username": None,
    "password": None,
    "apiKey": None,
    "caFile": None,
    "verifyTls": True,
    "indexPrefix": DEFAULT_INDEX_PREFIX,
    "createTemplate": True,
    "numberOfShards": 1,
    "numberOfReplicas": 0,
    "bulkSize": 1000,
    "bulkMemoryLimit": 10 * 1024 * 1024,
    "bulkDelay": 5.0,
    "requestTimeout": 30.0,
    "retentionEnabled": False,
    "retentionMinimumAge": "30d",
    "retentionPolicyName": "zeebe-record-retention-policy",
}


class ElasticsearchError(Exception):
    """A request to Elasticsearch failed (unreachable, an error status, or rejected bulk items)."""


@dataclass(frozen=True, slots=True)
class ElasticsearchSettings:
    """The exporter's validated configuration (``broker.exporters.<id>.args``, camelCase keys)."""

    url: str
    username: str | None
    password: str | None
    api_key: str | None
    ca_file: str | None
    verify_tls: bool
    index_prefix: str
    create_template: bool
    number_of_shards: int
    number_of_replicas: int
    bulk_size: int
    bulk_memory_limit: int
    bulk_delay_s: float
    request_timeout_s: float
    retention_enabled: bool
    retention_minimum_age: str
    retention_policy_name: str
    record_filter: RecordFilter

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> ElasticsearchSettings:
        """Validate ``args``; every problem raises `ExporterConfigurationError` naming the key."""
        reject_unknown_keys(args, [*_DEFAULTS, *_RECORD_TYPE_DEFAULTS, *_VALUE_TYPE_ARGS])
        a = {**_DEFAULTS, **args}
        url = _string(a, "url").rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ExporterConfigurationError(f"url: expected http(s)://host:port, got {url!r}")
        username, password, api_key = (_optional_string(a, k) for k in ("username", "password", "apiKey"))
        if (username is None) != (password is None):
            raise ExporterConfigurationError("username and password: set both for basic authentication, or neither")
        if username is not None and api_key is not None:
            raise ExporterConfigurationError("username/password and apiKey: choose one authentication method")
        ca_file = _optional_string(a, "caFile")
        if ca_file is not None and not Path(ca_file).is_file():
            raise ExporterConfigurationError(f"caFile: no such file {ca_file!r}")
        prefix = _string(a, "indexPrefix")
        if not _INDEX_PREFIX.match(prefix):
            raise ExporterConfigurationError(
                f"indexPrefix: {prefix!r} is not a valid index name prefix (lowercase letters, digits, '-' and '.')"
            )
        age = _string(a, "retentionMinimumAge")
        if not _AGE.match(age):
            raise ExporterConfigurationError(
                f"retentionMinimumAge: expected a duration like '30d' or '12h', got {age!r}"
            )
        record_filter = RecordFilter.from_switches(
            args, record_type_defaults=_RECORD_TYPE_DEFAULTS, value_types=es_templates.EXPORTABLE_VALUE_TYPES
        )
        if not record_filter.record_types or not record_filter.value_types:
            raise ExporterConfigurationError("every record type or every value type is switched off: nothing to export")
        return cls(
            url=url,
            username=username,
            password=password,
            api_key=api_key,
            ca_file=ca_file,
            verify_tls=_bool(a, "verifyTls"),
            index_prefix=prefix,
            create_template=_bool(a, "createTemplate"),
            number_of_shards=_int(a, "numberOfShards", 1),
            number_of_replicas=_int(a, "numberOfReplicas", 0),
            bulk_size=_int(a, "bulkSize", 1),
            bulk_memory_limit=_int(a, "bulkMemoryLimit", 1024),
            bulk_delay_s=_number(a, "bulkDelay", 0.001),
            request_timeout_s=_number(a, "requestTimeout", 0.1),
            retention_enabled=_bool(a, "retentionEnabled"),
            retention_minimum_age=age,
            retention_policy_name=_string(a, "retentionPolicyName"),
            record_filter=record_filter,
        )


def _string(a: Mapping[str, Any], key: str) -> str:
    value = a[key]
    if not isinstance(value, str) or not value:
        raise ExporterConfigurationError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _optional_string(a: Mapping[str, Any], key: str) -> str | None:
    return None if a.get(key) in (None, "") else _string(a, key)


def _bool(a: Mapping[str, Any], key: str) -> bool:
    value = a[key]
    if not isinstance(value, bool):
        raise ExporterConfigurationError(f"{key}: expected true or false, got {value!r}")
    return value


def _int(a: Mapping[str, Any], key: str, minimum: int) -> int:
    value = a[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ExporterConfigurationError(f"{key}: expected an integer of at least {minimum}, got {value!r}")
    return value


def _number(a: Mapping[str, Any], key: str, minimum: float) -> float:
    value = a[key]
    if not isinstance(value, int | float) or isinstance(value, bool) or value < minimum:
        raise ExporterConfigurationError(f"{key}: expected a number of seconds of at least {minimum}, got {value!r}")
    return float(value)


class HttpTransport:
    """Blocking JSON-over-HTTP calls to one Elasticsearch endpoint (run it on a worker thread)."""

    def __init__(self, settings: ElasticsearchSettings) -> None:
        self._base = settings.url
        timeout = urllib3.Timeout(connect=min(5.0, settings.request_timeout_s), read=settings.request_timeout_s)
        tls: dict[str, Any] = {}
        if settings.url.startswith("https"):
            tls = {"cert_reqs": "CERT_REQUIRED" if settings.verify_tls else "CERT_NONE"}
            if settings.ca_file:
                tls["ca_certs"] = settings.ca_file
            if not settings.verify_tls:
                tls["assert_hostname"] = False
        self._pool = urllib3.PoolManager(num_pools=2, maxsize=1, retries=False, timeout=timeout, **tls)
        self._headers = {"Accept": "application/json"}
        if settings.username is not None:
            token = base64.b64encode(f"{settings.username}:{settings.password}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        elif settings.api_key is not None:
            self._headers["Authorization"] = f"ApiKey {settings.api_key}"

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json") -> Any:
        """Send one request; the parsed JSON answer, or `ElasticsearchError` for anything but a 2xx answer."""
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            response = self._pool.request(method, self._base + path, body=body, headers=headers, retries=False)
        except urllib3.exceptions.HTTPError as e:
            raise ElasticsearchError(f"{method} {path}: {self._base} is unreachable: {e}") from e
        text = response.data.decode("utf-8", "replace")
        if not 200 <= response.status < 300:
            raise ElasticsearchError(f"{method} {path}: HTTP {response.status}: {text[:500]}")
        return json.loads(text) if text else None

    def close(self) -> None:
        self._pool.clear()


class BulkBuffer:
    """The pending ``_bulk`` body: action and document lines of consecutive records, with their size."""

    __slots__ = ("_lines", "count", "last_position", "size")

    def __init__(self, last_position: int) -> None:
        self._lines: list[str] = []
        self.count = 0
        self.size = 0
        self.last_position = last_position

    def add(self, position: int, action: str, document: str) -> None:
        self._lines.append(action)
        self._lines.append(document)
        self.count += 1
        self.size += len(action) + len(document) + 2
        self.last_position = position

    def body(self) -> bytes:
        return ("\n".join(self._lines) + "\n").encode("utf-8")

    def clear(self) -> None:
        self._lines.clear()
        self.count = 0
        self.size = 0


class ElasticsearchExporter(Exporter):
    """Exports records to Elasticsearch (see the module docstring for the index layout and guarantees)."""

    def configure(self, context: Context) -> None:
        self.settings = ElasticsearchSettings.from_args(context.configuration)
        context.set_filter(self.settings.record_filter)
        self._partition_id = context.partition_id
        self._routing = str(context.partition_id)
        self._version = context.broker_version.lower()
        self._logger = context.logger
        self._index_names: dict[tuple[ValueType, int], str] = {}
        self._templates_installed = not self.settings.create_template
        self._flush_timer: ScheduledTask | None = None
        self._transport: HttpTransport | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.flushes = 0

    def open(self, controller: Controller) -> None:
        self.controller = controller
        self._buffer = BulkBuffer(controller.last_exported_position)
        self._transport = HttpTransport(self.settings)
        name = f"weir-es-exporter-{self._partition_id}"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._schedule_flush()

    def export(self, record: Record) -> Awaitable[None] | None:
        buffer = self._buffer
        if record.position > buffer.last_position:  # offered again after a failed flush: already buffered
            document = dumps(record_document(record, self._version))
            action = (
                f'{{"index":{{"_index":"{self.index_name(record)}",'
                f'"_id":"{self._partition_id}-{record.position}","routing":"{self._routing}"}}}}'
            )
            buffer.add(record.position, action, document)
        if buffer.count >= self.settings.bulk_size or buffer.size >= self.settings.bulk_memory_limit:
            return self.flush()
        return None

    def index_name(self, record: Record) -> str:
        """``<prefix>_<value-type>_<version>_<day>``, the day of the record's timestamp in UTC."""
        day = record.timestamp // _DAY_MS
        key = (record.value_type, day)
        name = self._index_names.get(key)
        if name is None:
            date = datetime.fromtimestamp(day * _DAY_MS / 1000, UTC).strftime("%Y-%m-%d")
            slug = es_templates.value_type_slug(record.value_type)
            name = f"{self.settings.index_prefix}_{slug}_{self._version}_{date}"
            if len(self._index_names) > 1024:
                self._index_names.clear()
            self._index_names[key] = name
        return name

    async def flush(self) -> None:
        """Send the buffer; acknowledge its last position only when every document was indexed."""
        buffer = self._buffer
        if buffer.count == 0:
            return
        if not self._templates_installed:
            await self._in_thread(self._install_templates)
            self._templates_installed = True
        body = buffer.body()
        await self._in_thread(lambda: self._send_bulk(body))
        self.flushes += 1
        position = buffer.last_position
        buffer.clear()
        self.controller.update_last_exported_position(position)

    async def close(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        try:
            await self.flush()
        except Exception as e:
            self._logger.warning("final flush failed (the records are exported again after restart): %s", e)
        if self._executor is not None:
            if self._transport is not None:
                self._executor.submit(self._transport.close)
            self._executor.shutdown(wait=False)

    # -- internals -------------------------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        self._flush_timer = self.controller.schedule_task(self.settings.bulk_delay_s, self._flush_on_timer)

    async def _flush_on_timer(self) -> None:
        try:
            await self.flush()
        finally:
            self._schedule_flush()

    async def _in_thread(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _send_bulk(self, body: bytes) -> None:
        assert self._transport is not None
        answer = self._transport.request("POST", "/_bulk", body, "application/x-ndjson")
        if not isinstance(answer, dict) or "items" not in answer:
            raise ElasticsearchError(f"POST /_bulk: unexpected answer {str(answer)[:300]}")
        if answer.get("errors"):
            failed = [item for item in answer["items"] if next(iter(item.values())).get("error")]
            if failed:
                first = next(iter(failed[0].values()))
                error = first["error"]
                reason = error.get("reason", error) if isinstance(error, dict) else error
                kind = error.get("type", "error") if isinstance(error, dict) else "error"
                raise ElasticsearchError(
                    f"bulk request: {len(failed)} of {len(answer['items'])} documents were rejected; "
                    f"first: {first.get('_id')} in {first.get('_index')}: {kind}: {reason}"
                )

    def _install_templates(self) -> None:
        """Retention policy (when enabled), the component template, then one index template per value type."""
        assert self._transport is not None
        s = self.settings
        policy = None
        if s.retention_enabled:
            policy = s.retention_policy_name
            body = json.dumps(es_templates.retention_policy(s.retention_minimum_age)).encode()
            self._transport.request("PUT", f"/_ilm/policy/{policy}", body)
        component = es_templates.component_template(s.number_of_shards, s.number_of_replicas)
        self._transport.request("PUT", f"/_component_template/{s.index_prefix}", json.dumps(component).encode())
        for value_type in sorted(s.record_filter.value_types):
            template = es_templates.index_template(
                s.index_prefix,
                value_type,
                self._version,
                number_of_shards=s.number_of_shards,
                number_of_replicas=s.number_of_replicas,
                lifecycle_policy=policy,
            )
            name = f"{s.index_prefix}_{es_templates.value_type_slug(value_type)}_{self._version}"
            self._transport.request("PUT", f"/_index_template/{name}", json.dumps(template).encode())
        self._logger.info("installed index templates %s_*_%s", s.index_prefix, self._version)
