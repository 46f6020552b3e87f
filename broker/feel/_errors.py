"""The syntax error raised for unparsable FEEL text."""

from __future__ import annotations


class FeelSyntaxError(ValueError):
    """FEEL text that cannot be parsed.

    - ``position``: 0-based character offset of the offending token
    - ``line`` / ``column``: 1-based location of the same point
    - ``expression``: the full text; ``reason``: the message without location
    """

    def __init__(self, reason: str, expression: str, position: int) -> None:
        self.reason = reason
        self.expression = expression
        self.position = max(0, min(position, len(expression)))
        before = expression[: self.position]
        self.line = before.count("\n") + 1
        self.column = self.position - (before.rfind("\n") + 1) + 1
        super().__init__(f"{reason} at line {self.line}, column {self.column} (position {self.position})")
