"""Offline tools for operators and tests: read a partition's log, rebuild its state, compare states."""
