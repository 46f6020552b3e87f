"""The gateway's REST API: Camunda 8.8's Orchestration Cluster API (v2) over :class:`GatewayCommands`."""
