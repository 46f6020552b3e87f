"""The simulation's clients: they deploy the catalogue, start instances, work jobs and user tasks, publish messages,
resolve incidents and run canaries — through the gateway's real command layer, as applications would.

Every outcome lands in the :class:`History`: what the cluster acknowledged is what the checkers hold it to.
Clients learn what happened (instances completed, user tasks and incidents created) from the exporter sink, as an
application would from Elasticsearch.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from broker.command_api import MAX_PENDING_PUSHES
from broker.protocol.enums import (
    IncidentIntent,
    ProcessInstanceIntent,
    RecordType,
    UserTaskIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from client.sim import models
from client.sim.cluster import SimCluster
from gateway import identity, user_tasks
from gateway.commands import CommandError, GatewayCommands

# How long a client waits for a command's answer before it counts the outcome as unknown (simulated seconds).
REQUEST_TIMEOUT_MS = 5_000
# How long a worker holds the jobs it takes (polled or pushed). Simulated workers answer at once, so the timeout matters
# for jobs whose answer was lost (a dropped message, a crash): they come back this long after, and the drain lasts
# until they have (with 30 s, most of a run's drain waited for them). Twice the client's wait for an answer: the
# activation's answer and then the completion's.
JOB_TIMEOUT_MS = 10_000
# Workers that take their jobs from job streams (pushed), how many at once, and how often one goes and another comes.
STREAM_TYPE = "sim-push"
STREAM_WORKERS = 2
STREAM_CHURN_TICKS = 300
# The tenants the catalogue is deployed in (the gateway runs with multi-tenancy): each has its own versions, messages
# and jobs; workers take the jobs of both.
TENANTS = (TENANT, "sim-team-b")
# Every this many ticks an administrator changes the identity (a group, a member of it, a grant; a grant revoked):
# each change must be on every partition once it is acknowledged, leader changes and lost messages notwithstanding.
IDENTITY_EVERY_TICKS = 40


@dataclass(slots=True)
class History:
    """What clients were told: acknowledged outcomes are promises the cluster must keep."""

    deployed: dict[tuple[str, str], int] = field(default_factory=dict)  # (tenant, process id) → definition key
    deployment_keys: list[int] = field(default_factory=list)
    instances: dict[int, str] = field(default_factory=dict)  # acknowledged instance key → process id
    tenants: dict[int, str] = field(default_factory=dict)  # acknowledged instance key → its tenant
    completed_jobs: set[int] = field(default_factory=set)  # acknowledged job completions
    pushed: dict[int, list[int]] = field(default_factory=dict)  # job batch key of a push a worker got → its jobs
    canaries: dict[int, float] = field(default_factory=dict)  # canary instance key → simulated time created
    canary_done: dict[int, float] = field(default_factory=dict)
    # acknowledged identity changes: (value type, event intent, key, member id or "")
    identity: list[tuple[int, int, int, str]] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)


class _StreamWorker:
    """A worker on a job stream, with the gateway's side of it (StreamActivatedJobs): pushed jobs wait in a bounded
    queue; what the queue cannot take, or still holds when the worker goes, is given back (JOB YIELD)."""

    def __init__(self, workload: Workload, name: str) -> None:
        self.name = name
        self.open = True
        self.queue: asyncio.Queue[Record] = asyncio.Queue()
        self.handle = workload.gateway.client.open_job_stream(
            STREAM_TYPE, name, JOB_TIMEOUT_MS, [], self._sink, TENANTS
        )
        self.task = asyncio.get_running_loop().create_task(workload._stream_work(self))

    def _sink(self, record: Record) -> bool:
        if not self.open or self.queue.qsize() >= MAX_PENDING_PUSHES:
            return False
        self.queue.put_nowait(record)
        return True

    def close(self, gateway: GatewayCommands) -> None:
        self.open = False
        self.handle.close()
        self.task.cancel()
        left: list[tuple[int, dict]] = []
        while not self.queue.empty():
            record = self.queue.get_nowait()
            left.extend(zip(record.value["jobKeys"], record.value["jobs"], strict=True))
        if left:
            gateway.give_back(left)


class Workload:
    """Drives the catalogue against a cluster; ``step()`` once per tick, ``drain()`` to finish what was started."""

    def __init__(self, cluster: SimCluster, rng: random.Random, note: Callable[..., None]) -> None:
        self.cluster = cluster
        self.gateway = cluster.gateway
        self.rng = rng
        self.note = note
        self.history = History()
        self._tasks: set[asyncio.Task[None]] = set()
        self._offsets: dict[int, int] = {}  # sink records read so far, by partition
        # User tasks to complete and incidents to resolve (incident key → job key), oldest first: a few are taken
        # at a time and one whose call failed goes to the back, so none can keep the others waiting.
        self._user_tasks: dict[int, None] = {}
        self._incidents: dict[int, int] = {}
        # Incidents and user tasks the sink showed resolved / done: a call whose answer was lost (or a second call,
        # started by a CREATED the exporter offered again) must not put them back, or they are tried for ever.
        self._resolved: set[int] = set()
        self._done_user_tasks: set[int] = set()
        self.finished: set[int] = set()  # process instances completed (from the sink)
        self.starting = True
        self._streams: list[_StreamWorker] = []
        self._stream_names = itertools.count(1)
        self._creations = itertools.count()
        self._grants: list[int] = []  # authorization keys granted (and not yet revoked)

    # -- the tick --------------------------------------------------------------------------------------------

    def step(self, tick: int) -> None:
        while len(self._streams) < STREAM_WORKERS:
            self._streams.append(_StreamWorker(self, f"sim-streamer-{next(self._stream_names)}"))
        if tick % STREAM_CHURN_TICKS == STREAM_CHURN_TICKS // 2:
            self._streams.pop(self.rng.randrange(len(self._streams))).close(self.gateway)  # replaced next tick
        if len(self.history.deployed) < len(models.CATALOGUE) * len(TENANTS):
            if tick % 10 == 0:
                for tenant in TENANTS:
                    self._spawn(self._deploy(tenant))
            return
        self.read_sink()
        if self.starting and self.rng.random() < 0.3:
            self._spawn(self._create(self.rng.choice(models.CATALOGUE)))
        if self.starting and tick % 100 == 0:
            self._spawn(self._create(models.CANARY, canary=True))
        if tick % 5 == 0:
            for job_type in ("sim-work", "sim-check", "sim-flaky"):
                self._spawn(self._work(job_type))
        if tick % 25 == 0:  # jobs that became activatable while no stream was open are polled
            self._spawn(self._work(STREAM_TYPE))
        if self.starting and tick % IDENTITY_EVERY_TICKS == IDENTITY_EVERY_TICKS // 2:
            self._spawn(self._change_identity(tick // IDENTITY_EVERY_TICKS))
        if tick % 7 == 0:
            for key in list(self._user_tasks)[:5]:
                del self._user_tasks[key]
                self._spawn(self._complete_user_task(key))
            for incident, job in list(self._incidents.items())[:5]:
                del self._incidents[incident]
                self._spawn(self._resolve(incident, job))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Start a client call at a random moment within the tick (clients do not act in lockstep)."""
        task = asyncio.get_running_loop().create_task(self._after(self.rng.uniform(0, 0.01), coroutine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _after(delay: float, coroutine: Coroutine[Any, Any, None]) -> None:
        await asyncio.sleep(delay)
        await coroutine

    async def drain(self) -> None:
        """Stop starting instances; close the job streams; cancel client calls still waiting (their outcome stays
        unknown)."""
        self.starting = False
        streams, self._streams = self._streams, []
        for stream in streams:
            stream.close(self.gateway)
        await asyncio.gather(*(stream.task for stream in streams), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one client call -------------------------------------------------------------------------------------

    async def _call(self, what: str, call: Callable[[], Awaitable[Record]]) -> Record | None:
        """Run one gateway call; count its outcome (ok, a rejection code, or unknown)."""
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_MS / 1000):
                record = await call()
        except TimeoutError:
            self._outcome(f"{what} unknown")
            return None
        except CommandError as e:
            self._outcome(f"{what} {e.code.name}")
            return None
        self._outcome(f"{what} ok", record.key)
        return record

    def _outcome(self, outcome: str, key: int | None = None) -> None:
        self.history.outcomes[outcome] += 1
        self.note(outcome if key is None else f"{outcome} {key}", show=False)

    async def _change_identity(self, n: int) -> None:
        """An administrator's change, in turn: a new group, a client joining it, a grant to it, a grant revoked."""
        group = f"sim-group-{n // 4}"
        step = n % 4
        if step == 0:
            call = functools.partial(identity.create, self.gateway, "GROUP", {"groupId": group, "name": group})
        elif step == 1:
            call = functools.partial(identity.membership, self.gateway, "GROUP", group, "CLIENT", f"sim-{n}", add=True)
        elif step == 2:
            grant: dict[str, Any] = {"ownerType": "GROUP", "ownerId": group, "resourceType": "PROCESS_DEFINITION"}
            grant |= {"resourceId": "*", "permissionTypes": ["READ_PROCESS_INSTANCE"]}
            call = functools.partial(identity.create_authorization, self.gateway, grant)
        elif self._grants:
            call = functools.partial(identity.delete_authorization, self.gateway, self._grants.pop(0))
        else:
            return
        record = await self._call("identity", call)
        if record is None:
            return
        if record.value_type == ValueType.AUTHORIZATION and step == 2:
            self._grants.append(record.key)
        member = str(record.value.get("entityId") or "")
        self.history.identity.append((int(record.value_type), int(record.intent), record.key, member))

    async def _deploy(self, tenant: str) -> None:
        missing = [m for m in models.CATALOGUE if (tenant, m.process_id) not in self.history.deployed]
        if not missing:
            return
        resources = [(f"{m.process_id}.bpmn", m.xml) for m in missing]
        record = await self._call("deploy", lambda: self.gateway.deploy(resources, tenant))
        if record is None:
            return
        self.history.deployment_keys.append(record.key)
        for process in record.value.get("processesMetadata", []):
            self.history.deployed[(tenant, process["bpmnProcessId"])] = process["processDefinitionKey"]
        self.note(f"deployed {len(missing)} processes in {tenant} (deployment {record.key})")

    async def _create(self, model: models.Model, *, canary: bool = False) -> None:
        variables = model.variables(self.rng)
        # every other instance in the second tenant, without a draw of its own (other choices stay as they are)
        tenant = TENANT if canary else TENANTS[next(self._creations) % len(TENANTS)]
        record = await self._call(
            "create",
            lambda: self.gateway.create_process_instance(model.process_id, -1, -1, variables, tenant_id=tenant),
        )
        if record is None:
            return
        key = record.value["processInstanceKey"]
        self.history.instances[key] = model.process_id
        self.history.tenants[key] = tenant
        if canary:
            self.history.canaries[key] = asyncio.get_running_loop().time()
        if model.message is not None:
            name, variable = model.message
            await asyncio.sleep(self.rng.uniform(0, 2))
            await self._publish(name, variables[variable], tenant)

    async def _publish(self, name: str, correlation_key: str, tenant: str) -> None:
        """Publish until acknowledged: the message id makes a retry of a publish that did land a no-op (it is
        answered ALREADY_EXISTS while the first is buffered)."""
        for _attempt in range(30):
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_MS / 1000):
                    await self.gateway.publish_message(
                        name, correlation_key, 300_000, correlation_key, {"approved": True}, tenant
                    )
                self._outcome("publish ok")
                return
            except TimeoutError:
                self._outcome("publish unknown")
            except CommandError as e:
                self._outcome(f"publish {e.code.name}")
                if e.code.name == "ALREADY_EXISTS":
                    return
            await asyncio.sleep(1.0)

    async def _work(self, job_type: str) -> None:
        batches = []

        async def activate() -> Record:
            batches_of = self.gateway.activate_jobs(
                job_type, "sim-worker", JOB_TIMEOUT_MS, 10, [], -1, tenant_ids=TENANTS
            )
            async for batch in batches_of:
                batches.extend(batch)
            return Record(0, 0, RecordType.EVENT, ValueType.JOB_BATCH, 0, 0, {})

        if await self._call("activate", activate) is None:
            return
        for key, _job in batches:
            if job_type == "sim-flaky" and self.rng.random() < 0.7:
                await self._call("fail", functools.partial(self.gateway.fail_job, key, 0, "simulated failure", 0, {}))
                continue
            if (
                await self._call("complete", functools.partial(self.gateway.complete_job, key, {"done": True}))
                is not None
            ):
                self.history.completed_jobs.add(key)

    async def _stream_work(self, worker: _StreamWorker) -> None:
        """Work the jobs pushed to ``worker``: complete most, fail some (a retry after a back-off, or an incident)."""
        while True:
            record = await worker.queue.get()
            self.history.pushed[record.key] = list(record.value["jobKeys"])
            for key, job in zip(record.value["jobKeys"], record.value["jobs"], strict=True):
                self._outcome("pushed", key)
                await self._finish(key, job, fail=self.rng.random() < 0.15)

    async def _finish(self, key: int, job: dict, *, fail: bool) -> None:
        if fail:
            retries = max(int(job.get("retries", 1)) - 1, 0)
            await self._call("fail", lambda: self.gateway.fail_job(key, retries, "simulated failure", 500, {}))
            return
        if await self._call("complete", lambda: self.gateway.complete_job(key, {"done": True})) is not None:
            self.history.completed_jobs.add(key)

    async def _complete_user_task(self, key: int) -> None:
        done = await self._call("user task", lambda: user_tasks.complete(self.gateway, key, {})) is not None
        if not done and key not in self._done_user_tasks:
            self._user_tasks[key] = None  # tried again later (a completion that did land is refused NOT_FOUND then)

    async def _resolve(self, incident: int, job: int) -> None:
        retried = job <= 0 or await self._call("retries", lambda: self.gateway.update_job_retries(job, 1)) is not None
        resolved = retried and await self._call("resolve", lambda: self.gateway.resolve_incident(incident)) is not None
        if not resolved and incident not in self._resolved:
            self._incidents[incident] = job  # tried again later

    # -- what the sink says happened -------------------------------------------------------------------------

    def read_sink(self) -> None:
        from client.sim.sink import SINKS

        for pid, exported in SINKS[self.cluster.sink].items():
            start = self._offsets.get(pid, 0)
            for _position, record in exported[start:]:
                self._observe(record)
            self._offsets[pid] = len(exported)

    def _observe(self, record: Record) -> None:
        if record.record_type != RecordType.EVENT:
            return
        value_type, intent = record.value_type, record.intent
        if value_type == ValueType.USER_TASK and intent == UserTaskIntent.CREATED:
            if record.key not in self._done_user_tasks:  # not a CREATED offered again after its end
                self._user_tasks[record.key] = None
        elif value_type == ValueType.USER_TASK and intent in (UserTaskIntent.COMPLETED, UserTaskIntent.CANCELED):
            self._done_user_tasks.add(record.key)
            self._user_tasks.pop(record.key, None)
        elif value_type == ValueType.INCIDENT and intent == IncidentIntent.CREATED:
            if record.key not in self._resolved:  # not a CREATED offered again after its RESOLVED
                self._incidents[record.key] = record.value.get("jobKey", -1)
        elif value_type == ValueType.INCIDENT and intent == IncidentIntent.RESOLVED:
            self._resolved.add(record.key)
            self._incidents.pop(record.key, None)
        elif (
            value_type == ValueType.PROCESS_INSTANCE
            and intent == ProcessInstanceIntent.ELEMENT_COMPLETED
            and record.value.get("bpmnElementType") == "PROCESS"
        ):
            self.finished.add(record.key)
            started = self.history.canaries.get(record.key)
            if started is not None and record.key not in self.history.canary_done:
                self.history.canary_done[record.key] = asyncio.get_running_loop().time()
