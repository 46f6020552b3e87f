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
CONTEXT: Final = "CONTEXT"
RELATION: Final = "RELATION"
LIST: Final = "LIST"
INVOCATION: Final = "INVOCATION"

TYPE_REFS: Final = frozenset(
    {"string", "number", "boolean", "date", "time", "dateTime", "dayTimeDuration", "yearMonthDuration"}
)
"""The typeRefs a decision's result is checked against (with or without a ``feel:`` prefix); others pass."""


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
class ContextLogic:
    """A boxed context: entries evaluated in order, each seeing the ones before it. The result is ``result`` (the
    last entry when it has no variable) evaluated with every entry in scope, else the context of all entries."""

    entries: tuple[tuple[str, Logic], ...]
    result: Logic | None = None


@dataclass(frozen=True, slots=True)
class RelationLogic:
    """A boxed relation: each row becomes a context of column name to the value of its cell."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Logic, ...], ...]


@dataclass(frozen=True, slots=True)
class ListLogic:
    """A boxed list: the value of each item, in order."""

    items: tuple[Logic, ...]


@dataclass(frozen=True, slots=True)
class FunctionDefinition:
    """A boxed function (a context entry's value): ``parameters`` bound to the arguments of each call of ``body``."""

    parameters: tuple[str, ...]
    body: str  # FEEL


@dataclass(frozen=True, slots=True)
class Invocation:
    """Calls the business knowledge model named ``bkm_name``, each binding (parameter, FEEL) giving an argument."""

    bkm_name: str
    bindings: tuple[tuple[str, str], ...]


Logic = DecisionTable | LiteralExpression | ContextLogic | RelationLogic | ListLogic | FunctionDefinition | Invocation


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type_ref: str = ""


@dataclass(frozen=True, slots=True)
class BusinessKnowledgeModel:
    """A BKM: a function (its ``encapsulatedLogic``) that decisions call by the BKM's name, or invoke."""

    id: str
    name: str
    parameters: tuple[Parameter, ...]
    logic: Logic | None  # None: no encapsulated logic (calling it gives null)
    required_bkms: tuple[str, ...] = ()  # ids of the BKMs its logic calls


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision; ``required`` lists the ids of the decisions whose results it reads (evaluated first)."""

    id: str
    name: str
    logic: Logic
    required: tuple[str, ...] = ()
    version_tag: str = ""  # ``zeebe:versionTag`` (what business rule tasks bound by version tag look for)
    variable: str = ""  # the ``variable`` name: what decisions requiring this one call its result (else its id)
    type_ref: str = ""  # the variable's ``typeRef``: the result must be of this type
    required_bkms: tuple[str, ...] = ()  # ids of the business knowledge models its logic calls

    @property
    def result_name(self) -> str:
        return self.variable or self.id

    @property
    def decision_type(self) -> str:
        return decision_type_of(self.logic)


def decision_type_of(logic: Logic) -> str:
    """The Zeebe name of a kind of decision logic (as records report it)."""
    if isinstance(logic, DecisionTable):
        return DECISION_TABLE
    if isinstance(logic, ContextLogic):
        return CONTEXT
    if isinstance(logic, RelationLogic):
        return RELATION
    if isinstance(logic, ListLogic):
        return LIST
    if isinstance(logic, Invocation):
        return INVOCATION
    return LITERAL_EXPRESSION


@dataclass(frozen=True, slots=True)
class Drg:
    """A decision requirements graph: the ``definitions`` element of one DMN resource."""

    id: str
    name: str
    namespace: str
    decisions: tuple[Decision, ...]
    bkms: tuple[BusinessKnowledgeModel, ...] = ()

    def bkm(self, bkm_id: str) -> BusinessKnowledgeModel | None:
        for b in self.bkms:
            if b.id == bkm_id:
                return b
        return None

    def decision(self, decision_id: str) -> Decision | None:
        for d in self.decisions:
            if d.id == decision_id:
                return d
        return None
