"""What checking one deployment may spend, counted in resources and XML elements, never in time.

A deployment is checked on the partition's processing loop, so an oversized one would keep every other command of
the partition waiting. Its work is bounded by counts taken from the command alone (so replaying it decides the same
way): how many resources it holds, how many XML elements they hold together, and how many invalid resources are
checked before the rest are skipped. The rejection lists the first problems and says how many more there were, and
stays small enough for any client to receive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from broker.safe_xml import ElementCounter, TooManyElementsError, UnsafeXmlError, parse_xml

DEFAULT_MAX_RESOURCES: Final = 1000
DEFAULT_MAX_ELEMENTS: Final = 200_000
DEFAULT_MAX_INVALID_RESOURCES: Final = 10

MAX_REPORTED_PROBLEMS: Final = 50
"""Problem lines a rejection lists before saying how many more there are."""
MAX_PROBLEM_CHARS: Final = 400
"""A longer problem line is cut: rejections travel as gRPC status messages, which clients refuse beyond 16 KiB."""

MAX_SCOPE_DEPTH: Final = 50
"""Deepest nesting of sub-processes in a model: reading and running scopes recurses, and must stay far from
Python's recursion limit."""
_SCOPE_TAGS: Final = frozenset({"subProcess", "transaction", "adHocSubProcess"})


@dataclass(frozen=True, slots=True)
class DeploymentLimits:
    """The settings ``broker.deployments.*``."""

    max_resources: int = DEFAULT_MAX_RESOURCES
    max_elements: int = DEFAULT_MAX_ELEMENTS
    max_invalid_resources: int = DEFAULT_MAX_INVALID_RESOURCES


class ElementBudgetExceeded(Exception):
    """The deployment's resources hold more XML elements together than allowed."""


class DeploymentBudget:
    """The elements and invalid resources one deployment may still spend."""

    def __init__(self, limits: DeploymentLimits) -> None:
        self.limits = limits
        self.elements = ElementCounter(limits.max_elements)
        self.invalid_resources = 0

    @property
    def exhausted(self) -> bool:
        """True once enough invalid resources were found: the rest are not checked."""
        return self.invalid_resources >= self.limits.max_invalid_resources

    def measure(self, data: bytes) -> str | None:
        """Read the XML resource ``data`` once, charging the elements read to the budget (also of a malformed one;
        raises :class:`ElementBudgetExceeded` when they do not fit), and return the id of its first sub-process
        nested deeper than :data:`MAX_SCOPE_DEPTH`, found without recursion. None also when the XML cannot be read:
        the model's parser reports that with its reason (reading no more than was charged here)."""
        try:
            root = parse_xml(data, counter=self.elements)
        except TooManyElementsError:
            raise ElementBudgetExceeded from None
        except UnsafeXmlError:
            return None
        too_deep = None
        stack = [(root, 0)]
        while stack:
            node, depth = stack.pop()
            for child in node:
                child_depth = depth + (child.tag.rpartition("}")[2] in _SCOPE_TAGS)
                if child_depth > MAX_SCOPE_DEPTH and too_deep is None:
                    too_deep = child.get("id") or "(no id)"
                stack.append((child, child_depth))
        return too_deep

    def element_limit_reason(self) -> str:
        return (
            f"the resources of this deployment hold more than {self.limits.max_elements} XML elements together (the "
            "limit, broker.deployments.maxElements); deploy them in several smaller deployments"
        )


def too_many_resources(limits: DeploymentLimits, count: int) -> str | None:
    """Why a deployment of ``count`` resources is refused before any is read, or None."""
    if count <= limits.max_resources:
        return None
    return (
        f"Expected at most {limits.max_resources} resources in one deployment (the limit, "
        f"broker.deployments.maxResources), but got {count}; deploy them in several smaller deployments"
    )


def rejection(problems: list[str], skipped_resources: int, limits: DeploymentLimits) -> str:
    """The rejection text: the first problems, each cut to a readable length, then what was left out."""
    lines = []
    for problem in problems[:MAX_REPORTED_PROBLEMS]:
        for line in problem.splitlines():
            lines.append(line if len(line) <= MAX_PROBLEM_CHARS else line[: MAX_PROBLEM_CHARS - 1] + "…")
    shown = lines[:MAX_REPORTED_PROBLEMS]
    hidden = len(lines) - len(shown) + sum(problem.count("\n") + 1 for problem in problems[MAX_REPORTED_PROBLEMS:])
    if hidden:
        shown.append(f"… and {hidden} more problems not shown")
    if skipped_resources:
        shown.append(
            f"… and {skipped_resources} more resources not checked: checking stops after "
            f"{limits.max_invalid_resources} invalid resources (broker.deployments.maxInvalidResources)"
        )
    return "Expected to deploy new resources, but encountered the following errors:\n" + "\n".join(shown)
