"""Garbage-collector settings for long-running Weir processes.

Processing allocates many short-lived, acyclic containers (record values, decoded state); CPython's default
generation-0 threshold (700 allocations) then runs a collection every few commands, which measured ~5 % of the event
loop's time under load. Cycles are rare in this code, so collections can be much less frequent, and everything
allocated during start-up (modules, models, gRPC machinery) is moved out of the collector's sight once.
"""

from __future__ import annotations

import gc

# Allocations (net of deallocations) between generation-0 collections; older generations keep CPython's ratios.
GEN0_THRESHOLD = 50_000


def apply_after_startup() -> None:
    """Freeze what start-up allocated and collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
