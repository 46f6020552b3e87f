"""Open job push streams (StreamActivatedJobs), by job type, each for a list of tenants.

The registry is an input to processing, like a client command: which stream a job is pushed to is recorded in the
JOB_BATCH ACTIVATED event, so replay never consults it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from broker.protocol.values import TENANT


@dataclass(slots=True)
class JobStream:
    stream_id: int
    job_type: str
    worker: str
    timeout: int
    fetch_variables: list[str] = field(default_factory=list)
    tenant_ids: tuple[str, ...] = (TENANT,)
    # The authenticated worker that opened it (as a command's ``authorization``): it is pushed only jobs it could
    # activate itself. None: authentication is off.
    caller: dict[str, Any] | None = None


class JobStreams:
    """Streams per job type, picked round-robin among those open for the job's tenant so several workers share the
    load."""

    def __init__(self) -> None:
        self._by_type: dict[str, list[JobStream]] = {}
        self._by_id: dict[int, JobStream] = {}
        self._turn: dict[str, int] = {}
        self._ids = count(1)

    def add(
        self,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> JobStream:
        tenants = tuple(tenant_ids) or (TENANT,)
        stream = JobStream(next(self._ids), job_type, worker, timeout, list(fetch_variables), tenants, caller)
        self._by_type.setdefault(job_type, []).append(stream)
        self._by_id[stream.stream_id] = stream
        return stream

    def remove(self, stream_id: int) -> None:
        stream = self._by_id.pop(stream_id, None)
        if stream is None:
            return
        streams = self._by_type.get(stream.job_type, [])
        if stream in streams:
            streams.remove(stream)
        if not streams:
            self._by_type.pop(stream.job_type, None)

    def get(self, stream_id: int) -> JobStream | None:
        return self._by_id.get(stream_id)

    def pick(
        self, job_type: str, tenant_id: str = TENANT, may_take: Callable[[JobStream], bool] | None = None
    ) -> JobStream | None:
        """The next stream open for the job's type and tenant, and (for a stream with a caller) ``may_take``."""
        streams = self._by_type.get(job_type)
        if not streams:
            return None
        if any(tenant_id not in s.tenant_ids or s.caller is not None for s in streams):
            streams = [
                s
                for s in streams
                if tenant_id in s.tenant_ids and (s.caller is None or may_take is None or may_take(s))
            ]
            if not streams:
                return None
        turn = self._turn.get(job_type, 0) % len(streams)
        self._turn[job_type] = turn + 1
        return streams[turn]
