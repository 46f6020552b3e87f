"""The gateway's REST API: Camunda 8.9's Orchestration Cluster API (v2) over :class:`GatewayCommands`."""
