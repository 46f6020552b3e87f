"""The exporter director: runs a partition leader's exporters over its committed records.

Each exporter gets a container of its own (one asyncio task): it reads committed records from the log from
the exporter's acknowledged position on, applies the exporter's filter, calls ``export`` one record at a time
and runs the exporter's scheduled tasks in between. Independent containers mean a slow or failing exporter
(Elasticsearch down) never holds back another (the JSON-lines file); the price is that each exporter decodes
the log itself.

Guarantees:
- Records are offered in position order and only once committed (``notify_committed``).
- A failing ``export`` is retried on the same record with capped exponential back-off; no record is skipped.
- ``positions()`` are acknowledged positions only; ``lowest_position()`` bounds log compaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import importlib
import inspect
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import Counter, Gauge

from broker.protocol.record import Record
from exporters.api import (
    Clock,
    Context,
    Exporter,
    ExporterConfigurationError,
    RecordFilter,
    ScheduledCallable,
)

log = logging.getLogger("weir.exporter")

ReadRecords = Callable[[int], Iterator[Record]]
ExporterConfig = Mapping[str, Any]
Built = tuple[Any, Context]
# Starts a named task that is restarted when it fails (the partition's `TaskSupervisor.spawn`).
Spawn = Callable[[str, Callable[[], Coroutine[Any, Any, None]]], "asyncio.Task[None]"]

# With no exporter configured nothing holds the log back.
NO_EXPORTER_BOUND = 2**63 - 1
_STARVED_POLL_S = 0.01

EXPORTED_POSITION = Gauge(
    "weir_exporter_position", "Last position acknowledged by the exporter", ["exporter", "partition"]
)
EXPORTER_LAG = Gauge(
    "weir_exporter_lag_records",
    "Committed records not yet acknowledged by the exporter",
    ["exporter", "partition"],
)
EXPORT_FAILURES = Counter(
    "weir_exporter_failures_total",
    "Failed export calls, opens and scheduled tasks",
    ["exporter", "partition"],
)
RECORDS_EXPORTED = Counter(
    "weir_exporter_records_total",
    "Records handed to the exporter and accepted by it",
    ["exporter", "partition"],
)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def load_exporter_class(class_name: str) -> type[Exporter]:
    """Import ``package.module.Class`` (or ``package.module:Class``) and check it is an exporter."""
    module_name, sep, attr = class_name.partition(":")
    if not sep:
        module_name, _, attr = class_name.rpartition(".")
    what = f"className {class_name!r}"
    if not module_name or not attr:
        raise ExporterConfigurationError(f"{what} is not an import path like 'package.module.Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ExporterConfigurationError(f"{what}: cannot import {module_name!r}: {e}") from e
    cls = getattr(module, attr, None)
    if cls is None:
        raise ExporterConfigurationError(f"{what}: module {module_name!r} has no {attr!r}")
    if not (isinstance(cls, type) and callable(getattr(cls, "export", None))):
        raise ExporterConfigurationError(f"{what} is not an exporter class (it has no export method)")
    return cls


def build_exporter(
    exporter_id: str, config: ExporterConfig, partition_id: int, clock: Clock, min_free_disk_bytes: int = 0
) -> Built:
    """Load, construct and configure one exporter; any problem becomes an `ExporterConfigurationError`."""
    where = f"broker.exporters.{exporter_id}"
    if not isinstance(config, Mapping):
        raise ExporterConfigurationError(f"{where}: expected a mapping with className and args")
    class_name = config.get("className")
    if not isinstance(class_name, str) or not class_name:
        raise ExporterConfigurationError(f"{where}.className: required (an import path)")
    args = config.get("args") or {}
    if not isinstance(args, Mapping):
        raise ExporterConfigurationError(f"{where}.args: expected a mapping, got {args!r}")
    try:
        exporter = load_exporter_class(class_name)()
        context = Context(
            exporter_id=exporter_id,
            partition_id=partition_id,
            configuration=dict(args),
            logger=logging.getLogger(f"weir.exporter.{exporter_id}"),
            clock=clock,
            min_free_disk_bytes=min_free_disk_bytes,
        )
        exporter.configure(context)
    except ExporterConfigurationError as e:
        raise ExporterConfigurationError(f"exporter {exporter_id!r}: {e}") from e
    except Exception as e:
        raise ExporterConfigurationError(f"exporter {exporter_id!r} failed to configure: {e!r}") from e
    return exporter, context


def validate_exporter_configs(configs: Mapping[str, Mapping[str, Any]]) -> None:
    """Load and configure every exporter without opening it: a bad configuration stops the broker at start."""
    for exporter_id, config in configs.items():
        build_exporter(exporter_id, config, 1, wall_clock_ms)


class _ReadFailed(Exception):
    """Reading the log failed; ``error`` is the reader's exception (also the cause)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


_CAUGHT_UP = object()  # no committed record is left to offer
_YIELD = object()  # the round's share of records is offered: let the partition run


async def _call(result: Awaitable[None] | None) -> None:
    if inspect.isawaitable(result):
        await result


class _Task:
    """A scheduled task's handle (see `Controller.schedule_task`)."""

    __slots__ = ("callable", "cancelled", "due")

    def __init__(self, due: float, task: ScheduledCallable) -> None:
        self.due = due
        self.callable = task
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ExporterContainer:
    """One exporter's run: its reader, filter, acknowledged position, scheduled tasks and retry state.

    It is the exporter's `Controller`.
    """

    def __init__(
        self,
        exporter_id: str,
        exporter: Any,
        context: Context,
        *,
        partition_id: int,
        read_records: ReadRecords,
        position: int,
        retry_initial_s: float,
        recent: RecentRecords | None = None,
        retry_max_s: float,
        yield_every: int,
        spawn: Spawn | None = None,
    ) -> None:
        self.exporter_id = exporter_id
        self._spawn = spawn
        self.exporter = exporter
        self.context = context
        self.partition_id = partition_id
        self._read_records = read_records
        self._recent = recent
        self._acknowledged = position
        self._next_position = position + 1  # the next record to offer or skip
        self._last_offered = position  # the last record handed to export() successfully
        self._skipped_through = position  # the last record skipped after _last_offered
        self._committed = 0
        self._reader: Iterator[Record] | None = None
        self._lookahead: Record | None = None
        self._pending: Record | None = None  # a record whose export failed, offered again after back-off
        self._tasks: list[tuple[float, int, _Task]] = []
        self._sequence = itertools.count()
        self._wake = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._closing = False
        self._opened = False
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._yield_every = yield_every
        self.failures = 0
        self.retry_delay_s = 0.0
        self._task: asyncio.Task[None] | None = None
        self._rewind_to: int | None = None  # asked for by export_again_from, applied between exports
        self._rewound_from: int | None = None  # rewound: the first record read says whether some are gone
        labels = (exporter_id, str(partition_id))
        self._position_gauge = EXPORTED_POSITION.labels(*labels)
        self._lag_gauge = EXPORTER_LAG.labels(*labels)
        self._failures_counter = EXPORT_FAILURES.labels(*labels)
        self._exported_counter = RECORDS_EXPORTED.labels(*labels)
        self._exported_uncounted = 0
        self._offering = False  # inside a run of synchronous offers: gauges are set once at its end
        self._gauges_stale = False
        self._position_gauge.set(position)

    # -- Controller ------------------------------------------------------------------------------------------

    @property
    def last_exported_position(self) -> int:
        return self._acknowledged

    def update_last_exported_position(self, position: int) -> None:
        if position > self._last_offered:
            raise ValueError(
                f"exporter {self.exporter_id!r} acknowledged position {position}, beyond the last record it "
                f"was given ({self._last_offered})"
            )
        if position == self._last_offered:
            # Records filtered out after the last offered one are covered by this acknowledgement too.
            position = max(position, self._skipped_through)
        if position > self._acknowledged:
            self._acknowledged = position
            if self._offering:
                self._gauges_stale = True  # set once the run of offers ends, not per record
            else:
                self._update_gauges()

    def export_again_from(self, position: int) -> None:
        self._rewind_to = max(0, position)
        self._wake.set()

    def _rewind(self) -> None:
        position, self._rewind_to = self._rewind_to, None
        assert position is not None
        log.warning(
            "exporter %s (partition %d): exporting again from position %d",
            self.exporter_id,
            self.partition_id,
            position + 1,
        )
        self._next_position = position + 1
        self._last_offered = self._skipped_through = position
        self._reader = None
        self._lookahead = None
        self._pending = None
        self._rewound_from = position

    def schedule_task(self, delay_s: float, task: ScheduledCallable) -> _Task:
        handle = _Task(asyncio.get_running_loop().time() + max(0.0, delay_s), task)
        heapq.heappush(self._tasks, (handle.due, next(self._sequence), handle))
        self._wake.set()
        return handle

    # -- driven by the director ------------------------------------------------------------------------------

    @property
    def acknowledged(self) -> int:
        return self._acknowledged

    def notify_committed(self, position: int) -> None:
        if position > self._committed:
            self._committed = position
            self._update_gauges()
            self._wake.set()

    def start(self) -> None:
        """Run the container: supervised (restarted after an unexpected error) when the director was given a spawn."""
        if self._spawn is not None:
            self._task = self._spawn(f"exporter-{self.exporter_id}", self._run)
        else:
            self._task = asyncio.create_task(self._run_alone(), name=f"exporter-{self.exporter_id}-{self.partition_id}")

    def pause(self) -> None:
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()
        self._wake.set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    async def close(self, timeout_s: float) -> None:
        """Stop after the call in flight (bounded by ``timeout_s``), then close the exporter."""
        self._closing = True
        self._wake.set()
        self._resumed.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=timeout_s)
            if not done:
                log.warning("exporter %s: still busy at close, cancelling it", self.exporter_id)
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        self._count_exported()
        if self._opened:
            try:
                await asyncio.wait_for(_call(self.exporter.close()), timeout_s)
            except Exception:
                log.exception("exporter %s: close failed", self.exporter_id)
        self._reader = None

    # -- the loop --------------------------------------------------------------------------------------------

    async def _run_alone(self) -> None:
        try:
            await self._run()
        except Exception:
            log.exception("exporter %s: stopped by an unexpected error", self.exporter_id)

    async def _run(self) -> None:
        """Open the exporter (once), then offer records until closed; may be run again after it raised."""
        loop = asyncio.get_running_loop()
        self._reader = None  # read again from the next position: a failed run may have left the reader anywhere
        self._lookahead = None
        if not self._opened:
            await self._open()
        while not self._closing:
            if self.paused:
                await self._resumed.wait()
                continue
            if self._rewind_to is not None:
                self._rewind()
            if self._tasks and self._tasks[0][0] <= loop.time():  # checked here: most rounds have none due
                await self._run_due_tasks()
            try:
                outcome = self._offer_available(self._yield_every)
            except _ReadFailed as e:
                await self._failed(f"reading the log from position {self._next_position}", e.error)
                continue
            if outcome is _CAUGHT_UP:
                self._count_exported()
                await self._wait_for_work()
            elif outcome is _YIELD:
                self._count_exported()
                await asyncio.sleep(0)  # let the partition process commands between batches of exports
            else:
                await self._finish_export(*outcome)

    async def _open(self) -> None:
        while not self._closing:
            try:
                await _call(self.exporter.open(self))
                self._opened = True
                self._succeeded()
                return
            except Exception as e:
                await self._failed("open", e)

    def _offer_available(self, limit: int) -> Any:
        """Offer up to ``limit`` committed records without awaiting anything: exporters that export synchronously
        (most records, for most exporters) cost no coroutine per record.

        Returns ``_CAUGHT_UP`` when no committed record is left, ``_YIELD`` after ``limit`` records, or
        ``(record, awaitable or exception)`` when an export must be awaited or failed.
        """
        self._offering = True
        try:
            return self._offer_runs(limit)
        finally:
            self._offering = False

    def _offer_runs(self, limit: int) -> Any:
        record_filter = self.context.record_filter
        # The plain filter is applied here without a call per record; a subclass gets its own accepts() called.
        plain = type(record_filter) is RecordFilter
        record_types, value_types = record_filter.record_types, record_filter.value_types
        accepts = record_filter.accepts
        export = self.exporter.export
        offered = 0
        while offered < limit:
            run: Sequence[Record] | None = self._recent_run(limit - offered)
            if run is None:
                try:
                    record = self._next_record()
                except Exception as e:
                    raise _ReadFailed(e) from e
                if record is None:
                    return _CAUGHT_UP
                run = (record,)
            for record in run:
                position = record.position
                if not (
                    (record.record_type in record_types and record.value_type in value_types)
                    if plain
                    else accepts(record)
                ):
                    self._next_position = position + 1
                    self._skipped_through = position
                    if self._acknowledged >= self._last_offered:
                        # Everything offered is acknowledged, so skipped records need no exporter to confirm them.
                        self._acknowledged = position
                        self._gauges_stale = True
                    continue
                # The record counts as offered while export runs: an exporter may acknowledge it from inside export.
                self._last_offered = self._skipped_through = position
                try:
                    result = export(record)
                except Exception as e:
                    return record, e
                if result is not None:  # a coroutine exporter; a plain one costs no await
                    return record, result
                self._pending = None
                self._next_position = position + 1
                self._exported_uncounted += 1
                self.retry_delay_s = 0.0
            offered += len(run)
        return _YIELD

    def _recent_run(self, at_most: int) -> list[Record] | None:
        """The next committed records straight from what the partition just committed (caught-up exporters), or
        None when they must come from the log (or a record waits to be offered again)."""
        if (
            self._recent is None
            or self._pending is not None
            or self._lookahead is not None
            or self._reader is not None
            or self._next_position > self._committed
        ):
            return None
        last = min(self._committed, self._next_position + at_most - 1)
        return self._recent.run(self._next_position, last)

    async def _finish_export(self, record: Record, result: Any) -> None:
        """Await an export that returned an awaitable, or handle the exception it raised."""
        if not isinstance(result, Exception):
            try:
                await _call(result)
            except Exception as e:
                result = e
        if isinstance(result, Exception):
            self._pending = record
            await self._failed(f"export of position {record.position}", result)
            return
        self._pending = None
        self._next_position = record.position + 1
        self._exported_uncounted += 1
        self.retry_delay_s = 0.0

    def _count_exported(self) -> None:
        """Add the records exported since the last time to the metric (once per batch, not per record)."""
        if self._exported_uncounted:
            self._exported_counter.inc(self._exported_uncounted)
            self._exported_uncounted = 0
        if self._gauges_stale:
            self._update_gauges()

    def _next_record(self) -> Record | None:
        """The next committed record to offer from the log (or the one offered again), or None when there is none
        yet. Caught-up exporters take theirs from `_recent_run` instead."""
        if self._pending is not None:
            return self._pending
        if self._lookahead is not None:
            if self._lookahead.position > self._committed:
                return None
            record, self._lookahead = self._lookahead, None
            return record
        if self._next_position > self._committed:
            return None
        if self._reader is None:
            self._reader = self._read_records(self._next_position)
        for record in self._reader:
            if self._rewound_from is not None:
                if record.position > self._rewound_from + 1:
                    log.error(
                        "exporter %s (partition %d): records %d..%d are no longer in the log (compacted): they "
                        "cannot be exported again and are lost to this exporter",
                        self.exporter_id,
                        self.partition_id,
                        self._rewound_from + 1,
                        record.position - 1,
                    )
                self._rewound_from = None
            if record.position < self._next_position:
                continue
            if record.position > self._committed:
                self._lookahead = record
                return None
            return record
        self._reader = None  # ran out: read again from the next position once more is committed
        return None

    async def _run_due_tasks(self) -> None:
        now = asyncio.get_running_loop().time()
        while self._tasks and self._tasks[0][0] <= now and not self._closing and not self.paused:
            _, _, task = heapq.heappop(self._tasks)
            if task.cancelled:
                continue
            try:
                await _call(task.callable())
            except Exception as e:
                self._count_failure("scheduled task", e)

    async def _wait_for_work(self) -> None:
        self._wake.clear()
        timeout = None
        if self._tasks:
            timeout = max(0.0, self._tasks[0][0] - asyncio.get_running_loop().time())
        if self._next_position <= self._committed and self._lookahead is None:
            # Committed, yet the reader saw nothing more: poll briefly instead of spinning.
            timeout = min(timeout, _STARVED_POLL_S) if timeout is not None else _STARVED_POLL_S
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    # -- failures --------------------------------------------------------------------------------------------

    def _succeeded(self) -> None:
        self.retry_delay_s = 0.0

    async def _failed(self, what: str, error: Exception) -> None:
        """Count and log the failure, then back off (doubling, capped) before the same step is tried again."""
        self._count_exported()  # what was exported before the failure shows in the metrics while it backs off
        self._reader = None
        self._lookahead = None
        self.retry_delay_s = min(self._retry_max_s, max(self._retry_initial_s, self.retry_delay_s * 2))
        self._count_failure(what, error, retry_in=self.retry_delay_s)
        deadline = asyncio.get_running_loop().time() + self.retry_delay_s
        # Scheduled tasks (timed flushes) keep running during the back-off; records wait.
        while not self._closing:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            if self._tasks:
                remaining = min(remaining, max(0.0, self._tasks[0][0] - asyncio.get_running_loop().time()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)
            if not self.paused:
                await self._run_due_tasks()

    def _count_failure(self, what: str, error: Exception, retry_in: float | None = None) -> None:
        self.failures += 1
        self._failures_counter.inc()
        suffix = f"; retrying in {retry_in:.2f}s" if retry_in is not None else ""
        log.warning(
            "exporter %s (partition %d): %s failed: %s%s",
            self.exporter_id,
            self.partition_id,
            what,
            error,
            suffix,
        )

    def _update_gauges(self) -> None:
        self._gauges_stale = False
        self._position_gauge.set(self._acknowledged)
        self._lag_gauge.set(max(0, self._committed - self._acknowledged))


class RecentRecords:
    """The last records the partition committed, by position: caught-up exporters read them without the log.

    Kept as the partition's per-round lists (never changed once committed), so a run of records is one slice.
    """

    def __init__(self, capacity: int = 20_000) -> None:
        self._rounds: deque[list[Record]] = deque()
        self._count = 0
        self._capacity = capacity

    def add(self, records: list[Record]) -> None:
        if not records:
            return
        rounds = self._rounds
        if rounds and records[0].position != rounds[-1][-1].position + 1:
            rounds.clear()  # keep the buffer contiguous
            self._count = 0
        rounds.append(records)
        self._count += len(records)
        while len(rounds) > 1 and self._count - len(rounds[0]) >= self._capacity:
            self._count -= len(rounds.popleft())

    def run(self, first: int, last: int) -> list[Record] | None:
        """Records ``first``.. up to ``last`` (at least one), from one round; None if ``first`` is not kept."""
        for records in reversed(self._rounds):
            start = records[0].position
            if start <= first:
                index = first - start
                if index >= len(records):
                    return None
                return records[index : last - start + 1] or None
        return None


class ExporterDirector:
    """Runs the configured exporters of one partition on its leader.

    - ``configs`` maps exporter id → ``{"className": import path, "args": {...}}``; every exporter is loaded
      and configured here, so a bad configuration raises `ExporterConfigurationError` before anything runs.
    - ``read_records(from_position)`` yields committed records in position order (it may start earlier:
      earlier records are skipped).
    - ``positions`` are acknowledged positions restored from partition state; missing ids start at 0.
    - Call ``notify_committed(commit_position)`` once after ``start()`` and after every commit (event loop).
    """

    def __init__(
        self,
        partition_id: int,
        configs: Mapping[str, Mapping[str, Any]],
        *,
        read_records: ReadRecords,
        positions: Mapping[str, int],
        clock: Clock = wall_clock_ms,
        retry_initial_s: float = 0.1,
        retry_max_s: float = 10.0,
        close_timeout_s: float = 10.0,
        yield_every: int = 200,
        spawn: Spawn | None = None,
        min_free_disk_bytes: int = 0,
    ) -> None:
        self.partition_id = partition_id
        self._close_timeout_s = close_timeout_s
        self._spawn = spawn
        self._built = [
            (exporter_id, *build_exporter(exporter_id, config, partition_id, clock, min_free_disk_bytes))
            for exporter_id, config in configs.items()
        ]
        self._read_records = read_records
        self._positions = dict(positions)
        self._retry = (retry_initial_s, retry_max_s)
        self._yield_every = yield_every
        self.containers: dict[str, ExporterContainer] = {}
        self._recent = RecentRecords()
        self._committed = 0
        self._paused = False

    async def start(self) -> None:
        """Open every exporter (in its own task) and begin exporting from its acknowledged position."""
        for exporter_id, exporter, context in self._built:
            if exporter_id in self.containers:
                continue  # started by an earlier run of this method that failed later on
            container = ExporterContainer(
                exporter_id,
                exporter,
                context,
                partition_id=self.partition_id,
                read_records=self._read_records,
                position=max(0, int(self._positions.get(exporter_id, 0))),
                recent=self._recent,
                retry_initial_s=self._retry[0],
                retry_max_s=self._retry[1],
                yield_every=self._yield_every,
                spawn=self._spawn,
            )
            container.notify_committed(self._committed)
            if self._paused:
                container.pause()
            self.containers[exporter_id] = container
            container.start()

    async def close(self) -> None:
        """Stop every exporter after its call in flight and close it; acknowledged positions stay readable."""
        await asyncio.gather(*(c.close(self._close_timeout_s) for c in self.containers.values()))

    def notify_committed(self, position: int, records: list[Record] | None = None) -> None:
        """Records up to ``position`` are committed (``records``: the ones just committed, when at hand)."""
        if records:
            self._recent.add(records)
        if position > self._committed:
            self._committed = position
            for container in self.containers.values():
                container.notify_committed(position)

    def positions(self) -> dict[str, int]:
        """Acknowledged position per exporter id (before ``start``: the restored ones)."""
        if not self.containers:
            restored = self._positions
            return {eid: max(0, int(restored.get(eid, 0))) for eid, _, _ in self._built}
        return {exporter_id: c.acknowledged for exporter_id, c in self.containers.items()}

    def lowest_position(self) -> int:
        """Every record at or below this position is acknowledged by every exporter (compact below it + 1).

        0 while some exporter has acknowledged nothing; `NO_EXPORTER_BOUND` when no exporter is configured.
        """
        positions = self.positions()
        return min(positions.values()) if positions else NO_EXPORTER_BOUND

    def pause(self) -> None:
        """Stop offering records and running scheduled tasks (the call in flight completes)."""
        self._paused = True
        for container in self.containers.values():
            container.pause()

    def resume(self) -> None:
        self._paused = False
        for container in self.containers.values():
            container.resume()

    @property
    def paused(self) -> bool:
        return self._paused
