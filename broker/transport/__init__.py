"""How gateways and brokers reach partitions: the client used between nodes, below both.

- :mod:`.broker_client`: the seam (``BrokerClient``, ``Topology``) and ``LocalBrokerClient``, which calls the
  partitions of this process directly (an embedded gateway; commands between partitions of a single broker).
- :mod:`.remote`: ``RemoteBrokerClient``, over the brokers' command API (a gateway in its own process; commands
  between partitions of a cluster).
"""
