"""Weir's gateway: the Zeebe-compatible gRPC client API in front of the brokers."""
