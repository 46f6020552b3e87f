"""A job completion's result as the JOB COMPLETE command carries it (Zeebe's job result record), built the same way
from a gRPC CompleteJobRequest and a REST job completion.

Two kinds of job send one: a task listener (deny the user task's change, or correct its attributes) and the job of a
job-worker ad-hoc sub-process (which inner elements to activate, and whether the sub-process is done).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.commands import invalid
from gateway.user_tasks import listener_result

#: The result types as clients name them, and as the record carries them.
RESULT_TYPES = {"userTask": "USER_TASK", "adHocSubProcess": "AD_HOC_SUB_PROCESS"}


def job_result(
    result_type: str,
    *,
    denied: bool = False,
    denied_reason: str = "",
    corrections: dict[str, Any] | None = None,
    activate_elements: Sequence[tuple[str, dict[str, Any]]] = (),
    completion_condition_fulfilled: bool = False,
    cancel_remaining_instances: bool = False,
) -> dict[str, Any]:
    """The result record; ``corrections`` by API name (only those given), ``activate_elements`` as (element id,
    variables local to its activation). An unknown type or an element without an id is a 400 / INVALID_ARGUMENT."""
    kind = result_type or "userTask"
    if kind not in RESULT_TYPES:
        invalid(f"Expected the job result's type to be one of {list(RESULT_TYPES)}, but was '{result_type}'")
    activate = []
    for n, (element_id, variables) in enumerate(activate_elements):
        if not element_id:
            invalid(f"Expected activateElements[{n}] to have an elementId, but none given")
        activate.append({"elementId": element_id, "variables": variables})
    return {
        **listener_result(denied, denied_reason, corrections or {}),
        "type": RESULT_TYPES[kind],
        "activateElements": activate,
        "isCompletionConditionFulfilled": completion_condition_fulfilled,
        "isCancelRemainingInstances": cancel_remaining_instances,
    }
