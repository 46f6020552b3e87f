"""DMN for Weir: read decision requirements graphs (DMN 1.1-1.5) and evaluate their decisions with FEEL.

- :func:`parse_dmn` turns a ``.dmn`` resource (decisions whose logic is any boxed expression, business knowledge
  models) into an immutable :class:`Drg` or raises :class:`DmnParseError` listing every problem (unsafe XML, unknown
  hit policies, FEEL that does not parse, missing or cyclic required decisions or knowledge).
- :func:`evaluate_decision` evaluates one decision (its required decisions first) and returns a
  :class:`DecisionResult`: the output, what each decision saw and matched, or the failure naming the decision.
"""

from broker.dmn.evaluator import DecisionResult, EvaluatedDecision, EvaluatedRule, evaluate_decision
from broker.dmn.model import BusinessKnowledgeModel, Decision, DecisionTable, Drg, LiteralExpression
from broker.dmn.parser import DMN_NAMESPACES, DmnParseError, parse_dmn

__all__ = [
    "DMN_NAMESPACES",
    "BusinessKnowledgeModel",
    "Decision",
    "DecisionResult",
    "DecisionTable",
    "DmnParseError",
    "Drg",
    "EvaluatedDecision",
    "EvaluatedRule",
    "LiteralExpression",
    "evaluate_decision",
    "parse_dmn",
]
