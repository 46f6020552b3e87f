"""Generated stubs of the gateway protocol (proto/gateway.proto); regenerate with `make proto`."""
