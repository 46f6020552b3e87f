"""The parsed form of a DMN decision requirements graph (DRG): immutable values the evaluator reads.

Expressions are kept as their FEEL text; the parser has already checked that each one compiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

UNIQUE: Final = "UNIQUE"
FIRST: Final = "FIRST"
PRIORITY: Final = "PRIORITY"
ANY: Final = "ANY"
COLLECT: Final = "COLLECT"
RULE_ORDER: Final = "RULE ORDER"
OUTPUT_ORDER: Final = "OUTPUT ORDER"
HIT_POLICIES: Final = frozenset({UNIQUE, FIRST, PRIORITY, ANY, COLLECT, RULE_ORDER, OUTPUT_ORDER})
SINGLE_RESULT_POLICIES: Final = frozenset({UNIQUE, FIRST, PRIORITY, ANY})
AGGREGATIONS: Final = frozenset({"SUM", "MIN", "MAX", "COUNT"})

DECISION_TABLE: Final = "DECISION_TABLE"
LITERAL_EXPRESSION: Final = "LITERAL_EXPRESSION"


@dataclass(frozen=True, slots=True)
class Input:
    """A decision table input: ``expression`` (FEEL) gives the value its input entries test."""

    id: str
    label: str
    expression: str

    @property
    def name(self) -> str:
        return self.label or self.expression


@dataclass(frozen=True, slots=True)
class Output:
    """A decision table output; ``values`` (FEEL literals) rank results for PRIORITY and OUTPUT ORDER."""

    id: str
    label: str
    name: str
    values: tuple[object, ...] = ()
    default: str = ""  # ``defaultOutputEntry`` (FEEL): the output when no rule matches

    @property
    def result_name(self) -> str:
        return self.name or self.label or self.id


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: an input entry (FEEL unary tests) per input and an output entry (FEEL) per output."""

    id: str
    index: int  # 1-based, in table order
    input_entries: tuple[str, ...]
    output_entries: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DecisionTable:
    hit_policy: str
    aggregation: str | None
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class LiteralExpression:
    expression: str
    variable_name: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision; ``required`` lists the ids of the decisions whose results it reads (evaluated first)."""

    id: str
    name: str
    logic: DecisionTable | LiteralExpression
    required: tuple[str, ...] = ()
    version_tag: str = ""  # ``zeebe:versionTag`` (what business rule tasks bound by version tag look for)
    variable: str = ""  # the ``variable`` name: what decisions requiring this one call its result (else its id)

    @property
    def result_name(self) -> str:
        return self.variable or self.id

    @property
    def decision_type(self) -> str:
        return DECISION_TABLE if isinstance(self.logic, DecisionTable) else LITERAL_EXPRESSION


@dataclass(frozen=True, slots=True)
class Drg:
    """A decision requirements graph: the ``definitions`` element of one DMN resource."""

    id: str
    name: str
    namespace: str
    decisions: tuple[Decision, ...]

    def decision(self, decision_id: str) -> Decision | None:
        for d in self.decisions:
            if d.id == decision_id:
                return d
        return None
