"""Why a BPMN resource was rejected: every problem, each naming the element it is about."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason to reject a resource; ``element_id`` is None for problems of the whole document."""

    element_id: str | None
    reason: str

    def __str__(self) -> str:
        if self.element_id is None:
            return self.reason
        return f"'{self.element_id}': {self.reason}"


class BpmnValidationError(ValueError):
    """A resource that cannot be deployed.

    - ``problems``: one line per problem, ``'<element id>': <reason>``, grouped by rule.
    - ``details``: the same problems as structured values.
    - ``str()``: a summary line naming the resource, then the problem lines: the text a
      deployment rejection carries back to the client.
    """

    def __init__(self, resource_name: str, details: tuple[Problem, ...]) -> None:
        self.resource_name = resource_name
        self.details = details
        self.problems: tuple[str, ...] = tuple(str(problem) for problem in details)
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        summary = f"'{self.resource_name}' is not a valid BPMN resource ({count} {noun}):"
        return "\n".join([summary, *self.problems])

    def __str__(self) -> str:
        return self._render()
