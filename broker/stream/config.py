"""A partition's settings: rounds, limits, snapshots, exporters and admission control."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.engine.behaviors import DEFAULT_MAX_PROCESS_DEPTH
from broker.engine.deployment_limits import DeploymentLimits
from broker.feel import DEFAULT_LIMITS, Limits
from broker.stream.backpressure import BackpressureConfig
from broker.stream.core import CoreConfig
from broker.stream.step_budget import DEFAULT_MAX_CHAIN_INSTANCES, DEFAULT_MAX_STEPS_PER_INSTANCE


@dataclass(slots=True)
class PartitionConfig:
    partition_id: int = 1
    max_records_per_round: int = 4000
    max_commands_per_round: int = 500
    max_inbox: int = 10_000
    snapshot_period_s: float = 300.0
    snapshot_min_records: int = 100_000
    checker_interval_s: float = 0.1
    segment_size: int = 64 << 20
    close_timeout_s: float = 10.0
    # Exporters by id: {"className": "pkg.mod.Class", "args": {...}} (see exporters/).
    exporters: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Admission control of user commands (see broker/stream/backpressure.py); None admits everything.
    backpressure: BackpressureConfig | None = field(default_factory=BackpressureConfig)
    # All partitions of the cluster: deployments made here are distributed to the others.
    partitions_count: int = 1
    # Below this much free disk the partition rejects new commands (RESOURCE_EXHAUSTED) until space is back.
    min_free_disk_bytes: int = 256 << 20
    # The largest gRPC message: no variables document may be larger, or no worker could ever be sent it.
    max_message_size: int = 4 << 20
    # Element activations one process instance may make in one chain of follow-ups before it is stopped with an
    # incident (see broker/stream/step_budget.py); 0 turns the budget off.
    max_steps_per_instance: int = DEFAULT_MAX_STEPS_PER_INSTANCE
    # Process instances one chain of signal broadcasts may start before the next one stops with an incident (see
    # broker/stream/step_budget.py); 0 turns the bound off.
    max_instances_per_signal_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    # Process instances one chain of follow-ups may start by recursion (see step_budget.py); 0 turns the bound off.
    max_recursive_instances_per_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    # Process instances in one chain of call activities (the root is 1): a deeper call raises an incident.
    max_process_depth: int = DEFAULT_MAX_PROCESS_DEPTH
    # What one FEEL evaluation may spend (steps and produced size); its result may be at most max_message_size.
    expression_limits: Limits = DEFAULT_LIMITS
    # What checking one deployment may spend (resources, XML elements, invalid resources checked).
    deployment_limits: DeploymentLimits = field(default_factory=DeploymentLimits)
    # Reject a creation whose business id an active root instance of the same process (and tenant) already has.
    business_id_uniqueness: bool = False
    # Commands of authenticated callers need granted permissions (broker/engine/access.py).
    authorizations: bool = False

    def core(self) -> CoreConfig:
        return CoreConfig(
            partition_id=self.partition_id,
            max_records_per_round=self.max_records_per_round,
            max_commands_per_round=self.max_commands_per_round,
            max_steps_per_instance=self.max_steps_per_instance,
            max_instances_per_signal_chain=self.max_instances_per_signal_chain,
            max_recursive_instances_per_chain=self.max_recursive_instances_per_chain,
        )
