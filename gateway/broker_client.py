"""The seam between the gateway and the brokers now lives in :mod:`broker.transport.broker_client` (brokers use it
between partitions too); these names stay importable from here for existing callers."""

from broker.transport.broker_client import (
    BrokerClient,
    BrokerInfo,
    JobsAvailableListener,
    JobSink,
    JobStreamHandle,
    LocalBrokerClient,
    PartitionInfo,
    Topology,
)

__all__ = [
    "BrokerClient",
    "BrokerInfo",
    "JobSink",
    "JobStreamHandle",
    "JobsAvailableListener",
    "LocalBrokerClient",
    "PartitionInfo",
    "Topology",
]
