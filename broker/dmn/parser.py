"""Read a DMN resource (DMN 1.1 to 1.5) into a :class:`~broker.dmn.model.Drg`, refusing invalid graphs.

The XML is read like BPMN: no DTDs, no entities, bounded size. Every problem found is reported at once, each naming
the decision (or element) it concerns, in a :class:`DmnParseError`.
"""

from __future__ import annotations

import re
from typing import Final
from xml.etree.ElementTree import Element as XmlElement

from broker import feel
from broker.dmn import model as m
from broker.safe_xml import UnsafeXmlError, parse_xml

DMN_NAMESPACES: Final = frozenset(
    {
        "http://www.omg.org/spec/DMN/20151101/dmn.xsd",  # 1.1
        "http://www.omg.org/spec/DMN/20180521/MODEL/",  # 1.2
        "https://www.omg.org/spec/DMN/20191111/MODEL/",  # 1.3
        "https://www.omg.org/spec/DMN/20211108/MODEL/",  # 1.4
        "https://www.omg.org/spec/DMN/20230324/MODEL/",  # 1.5
    }
)

ZEEBE_NS: Final = "http://camunda.org/schema/zeebe/1.0"

MAX_DECISIONS: Final = 1000
"""Most decisions in one DRG (required decisions are evaluated by walking the graph)."""


class DmnParseError(ValueError):
    """The resource is not a DMN model the engine can evaluate; ``problems`` lists why."""

    def __init__(self, resource_name: str, problems: list[str]) -> None:
        self.resource_name = resource_name
        self.problems = problems
        super().__init__(f"'{resource_name}': " + "\n".join(problems))


def _split(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, local = tag[1:].partition("}")
        return ns, local
    return "", tag


_EXPRESSION_ELEMENTS: Final = frozenset(
    {"decisionTable", "literalExpression", "context", "relation", "list", "invocation", "functionDefinition"}
)
_UNSUPPORTED_EXPRESSIONS: Final = frozenset({"conditional", "for", "every", "some", "filter"})
"""DMN 1.4 boxed expressions, which Zeebe does not evaluate either: refused, naming the element."""


def _local(node: XmlElement) -> str:
    return _split(node.tag)[1] if isinstance(node.tag, str) else ""


def _href_id(ref: XmlElement) -> str:
    href = (ref.get("href") or "").strip()
    return href.partition("#")[2] if "#" in href else href


_FEEL_NAME: Final = re.compile(r"[A-Za-z_?][A-Za-z0-9_?]*")


def _is_parameter_name(name: str) -> bool:
    """Whether a boxed function's parameter can be named in FEEL: a name without spaces that is no keyword."""
    if not _FEEL_NAME.fullmatch(name):
        return False
    try:
        feel.parse(f"function({name}) {name}")
    except (feel.FeelSyntaxError, RecursionError):
        return False
    return True


class _Reader:
    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.problems: list[str] = []
        self.invoked: list[tuple[str, str]] = []  # (where, BKM name) of every invocation, checked once all are read

    def children(self, node: XmlElement, local: str) -> list[XmlElement]:
        return [c for c in node if c.tag == f"{{{self.ns}}}{local}"]

    def child(self, node: XmlElement, local: str) -> XmlElement | None:
        found = self.children(node, local)
        return found[0] if found else None

    def text_of(self, node: XmlElement | None) -> str:
        if node is None:
            return ""
        text = self.child(node, "text")
        return (text.text or "").strip() if text is not None else ""

    def problem(self, where: str, reason: str) -> None:
        self.problems.append(f"{where}: {reason}")

    def check_expression(self, where: str, text: str) -> None:
        try:
            feel.parse(text)
        except feel.FeelSyntaxError as e:
            self.problem(where, f"failed to parse expression '{text}': {e}")
        except RecursionError:
            self.problem(where, f"expression '{text[:80]}' is nested too deeply")

    def check_unary_tests(self, where: str, text: str) -> None:
        try:
            feel.parse_unary_tests(text)
        except feel.FeelSyntaxError as e:
            self.problem(where, f"failed to parse unary tests '{text}': {e}")
        except RecursionError:
            self.problem(where, f"unary tests '{text[:80]}' are nested too deeply")

    # -- decisions ---------------------------------------------------------------------------------------------

    def decision(self, node: XmlElement) -> m.Decision | None:
        decision_id = (node.get("id") or "").strip()
        name = node.get("name") or decision_id
        where = f"Decision '{decision_id or '(no id)'}'"
        if not decision_id:
            self.problem(where, "Attribute 'id' must be present and not empty")
        required = []
        for req in self.children(node, "informationRequirement"):
            ref = self.child(req, "requiredDecision")
            if ref is not None:
                href = (ref.get("href") or "").strip()
                required.append(href[1:] if href.startswith("#") else href)
        required_bkms = []
        for req in self.children(node, "knowledgeRequirement"):
            ref = self.child(req, "requiredKnowledge")
            if ref is not None:
                required_bkms.append(_href_id(ref))
        variable = self.child(node, "variable")
        variable_name = (variable.get("name") or "").strip() if variable is not None else ""
        type_ref = (variable.get("typeRef") or "").strip() if variable is not None else ""
        expression = self.expression_element(node)
        if expression is None:
            self.problem(where, "the decision has no decision logic")
            return None
        if _local(expression) == "literalExpression":
            text = self.text_of(expression)
            if not text:
                self.problem(where, "the literal expression has no text")
            else:
                self.check_expression(where, text)
            logic: m.Logic | None = m.LiteralExpression(text, variable_name or decision_id)
        elif _local(expression) == "functionDefinition":
            self.problem(where, "a function definition is not supported as decision logic")
            logic = None
        else:
            logic = self.logic(where, expression)
        if logic is None:
            return None
        version_tag = ""
        extensions = self.child(node, "extensionElements")
        if extensions is not None:
            tag = extensions.find(f"{{{ZEEBE_NS}}}versionTag")
            if tag is not None:
                version_tag = (tag.get("value") or "").strip()
        return m.Decision(
            decision_id, name, logic, tuple(required), version_tag, variable_name, type_ref, tuple(required_bkms)
        )

    # -- boxed expressions -------------------------------------------------------------------------------------

    def expression_element(self, node: XmlElement) -> XmlElement | None:
        """The first child of ``node`` that is a DMN expression element (its logic), else None."""
        for child in node:
            ns, local = _split(child.tag) if isinstance(child.tag, str) else ("", "")
            if ns == self.ns and (local in _EXPRESSION_ELEMENTS or local in _UNSUPPORTED_EXPRESSIONS):
                return child
        return None

    def logic(self, where: str, node: XmlElement) -> m.Logic | None:
        """A boxed expression element (decision table, literal expression, context, relation, list, invocation or
        function definition) read into its model; None (and a problem) when it cannot be evaluated."""
        kind = _local(node)
        if kind == "decisionTable":
            return self.decision_table(where, node)
        if kind == "literalExpression":
            text = self.text_of(node)
            if not text:
                self.problem(where, "a literal expression has no text")
                return None
            self.check_expression(where, text)
            return m.LiteralExpression(text, "")
        if kind == "context":
            return self.context(where, node)
        if kind == "relation":
            return self.relation(where, node)
        if kind == "list":
            items = [self.logic(where, item) for item in node if _local(item) in _EXPRESSION_ELEMENTS]
            if any(item is None for item in items):
                return None
            return m.ListLogic(tuple(i for i in items if i is not None))
        if kind == "invocation":
            return self.invocation(where, node)
        if kind == "functionDefinition":
            params = tuple((p.get("name") or "").strip() for p in self.children(node, "formalParameter"))
            body = self.child(node, "literalExpression")
            if body is None or not self.text_of(body):
                self.problem(where, "a function definition needs a literal expression as its body")
                return None
            if not all(_is_parameter_name(p) for p in params):
                self.problem(where, "a function definition's parameters need names that are FEEL names")
                return None
            self.check_expression(where, self.text_of(body))
            return m.FunctionDefinition(params, self.text_of(body))
        self.problem(where, f"the element '{kind}' is not supported as decision logic")
        return None

    def context(self, where: str, node: XmlElement) -> m.ContextLogic | None:
        entries: list[tuple[str, m.Logic]] = []
        result: m.Logic | None = None
        nodes = self.children(node, "contextEntry")
        if not nodes:
            self.problem(where, "a context needs at least one context entry")
            return None
        ok = True
        for index, entry in enumerate(nodes):
            variable = self.child(entry, "variable")
            name = (variable.get("name") or "").strip() if variable is not None else ""
            expression = self.expression_element(entry)
            if expression is None:
                self.problem(where, f"context entry '{name or index + 1}' has no expression")
                ok = False
                continue
            logic = self.logic(where, expression)
            if logic is None:
                ok = False
                continue
            if name:
                entries.append((name, logic))
            elif index == len(nodes) - 1:
                result = logic
            else:
                self.problem(where, "only the last context entry may have no variable (it gives the result)")
                ok = False
        return m.ContextLogic(tuple(entries), result) if ok else None

    def relation(self, where: str, node: XmlElement) -> m.RelationLogic | None:
        columns = tuple((c.get("name") or "").strip() for c in self.children(node, "column"))
        if not columns or not all(columns):
            self.problem(where, "a relation needs columns, each with a name")
            return None
        rows = []
        ok = True
        for row in self.children(node, "row"):
            cells = [self.logic(where, cell) for cell in row if _local(cell) in _EXPRESSION_ELEMENTS]
            if len(cells) != len(columns):
                self.problem(where, f"expected row with '{len(columns)}' elements but found '{len(cells)}'")
                ok = False
            elif any(cell is None for cell in cells):
                ok = False
            else:
                rows.append(tuple(c for c in cells if c is not None))
        return m.RelationLogic(columns, tuple(rows)) if ok else None

    def invocation(self, where: str, node: XmlElement) -> m.Invocation | None:
        called = self.child(node, "literalExpression")
        name = self.text_of(called)
        if not name:
            self.problem(where, "an invocation needs a literal expression naming the business knowledge model")
            return None
        bindings = []
        for binding in self.children(node, "binding"):
            parameter = self.child(binding, "parameter")
            param_name = (parameter.get("name") or "").strip() if parameter is not None else ""
            value = self.child(binding, "literalExpression")
            if not param_name or value is None:
                self.problem(where, "each binding of an invocation needs a parameter and a literal expression")
                return None
            text = self.text_of(value)
            if text:
                self.check_expression(where, text)
            bindings.append((param_name, text))
        self.invoked.append((where, name))
        return m.Invocation(name, tuple(bindings))

    # -- business knowledge models -----------------------------------------------------------------------------

    def bkm(self, node: XmlElement) -> m.BusinessKnowledgeModel | None:
        bkm_id = (node.get("id") or "").strip()
        name = (node.get("name") or "").strip()
        where = f"Business knowledge model '{bkm_id or name or '(no id)'}'"
        if not bkm_id:
            self.problem(where, "Attribute 'id' must be present and not empty")
        if not name:
            self.problem(where, "Attribute 'name' must be present and not empty: decisions call the model by it")
            return None
        required = tuple(
            _href_id(ref)
            for req in self.children(node, "knowledgeRequirement")
            if (ref := self.child(req, "requiredKnowledge")) is not None
        )
        encapsulated = self.child(node, "encapsulatedLogic")
        if encapsulated is None:
            return m.BusinessKnowledgeModel(bkm_id, name, (), None, required)
        parameters = tuple(
            m.Parameter((p.get("name") or "").strip(), (p.get("typeRef") or "").strip())
            for p in self.children(encapsulated, "formalParameter")
        )
        if not all(p.name for p in parameters):
            self.problem(where, "every formal parameter needs a name")
        expression = self.expression_element(encapsulated)
        logic = self.logic(where, expression) if expression is not None else None
        if expression is not None and logic is None:
            return None
        return m.BusinessKnowledgeModel(bkm_id, name, parameters, logic, required)

    def decision_table(self, where: str, node: XmlElement) -> m.DecisionTable | None:
        hit_policy = (node.get("hitPolicy") or m.UNIQUE).strip().upper()
        aggregation = node.get("aggregation")
        aggregation = aggregation.strip().upper() if aggregation else None
        if hit_policy not in m.HIT_POLICIES:
            self.problem(where, f"unknown hit policy '{hit_policy}'")
        if aggregation is not None and (hit_policy != m.COLLECT or aggregation not in m.AGGREGATIONS):
            self.problem(where, f"aggregation '{aggregation}' needs hit policy COLLECT and one of SUM, MIN, MAX, COUNT")
        inputs = []
        for i, inp in enumerate(self.children(node, "input"), 1):
            expr = self.text_of(self.child(inp, "inputExpression"))
            input_id = inp.get("id") or f"input{i}"
            if not expr:
                self.problem(where, f"input '{input_id}' has no input expression")
            else:
                self.check_expression(where, expr)
            inputs.append(m.Input(input_id, inp.get("label") or "", expr))
        outputs = []
        for i, out in enumerate(self.children(node, "output"), 1):
            output_id = out.get("id") or f"output{i}"
            values_text = self.text_of(self.child(out, "outputValues"))
            values: tuple[object, ...] = ()
            if values_text:
                try:
                    listed = feel.evaluate(f"[{values_text}]")
                except (feel.FeelSyntaxError, feel.FeelEvaluationError, RecursionError) as e:
                    self.problem(where, f"output '{output_id}': failed to read output values '{values_text}': {e}")
                else:
                    values = tuple(feel.to_json_value(v) for v in listed or ())
            default = self.text_of(self.child(out, "defaultOutputEntry"))
            if default:
                self.check_expression(where, default)
            outputs.append(m.Output(output_id, out.get("label") or "", out.get("name") or "", values, default))
        if not outputs:
            self.problem(where, "a decision table needs at least one output")
        if len(outputs) > 1:
            names = [o.name for o in outputs]
            if any(not n for n in names) or len(set(names)) != len(names):
                self.problem(where, "a decision table with several outputs needs a distinct 'name' on each output")
            if aggregation is not None:
                self.problem(where, f"aggregation '{aggregation}' needs a decision table with a single output")
        if hit_policy in (m.PRIORITY, m.OUTPUT_ORDER) and not any(o.values for o in outputs):
            self.problem(where, f"hit policy '{hit_policy}' needs output values to order the results by")
        rules = []
        for index, rule in enumerate(self.children(node, "rule"), 1):
            rule_id = rule.get("id") or f"rule{index}"
            entries = tuple(self.text_of(e) for e in self.children(rule, "inputEntry"))
            results = tuple(self.text_of(e) for e in self.children(rule, "outputEntry"))
            if len(entries) != len(inputs) or len(results) != len(outputs):
                self.problem(
                    where,
                    f"rule '{rule_id}' has {len(entries)} input and {len(results)} output entries, but the table "
                    f"has {len(inputs)} inputs and {len(outputs)} outputs",
                )
                continue
            for entry in entries:
                if entry and entry != "-":
                    self.check_unary_tests(f"{where}, rule '{rule_id}'", entry)
            for result in results:
                if result:
                    self.check_expression(f"{where}, rule '{rule_id}'", result)
            rules.append(m.Rule(rule_id, index, entries, results))
        return m.DecisionTable(hit_policy, aggregation, tuple(inputs), tuple(outputs), tuple(rules))


def parse_dmn(data: bytes, resource_name: str = "resource.dmn") -> m.Drg:
    """The DRG in ``data``; raises :class:`DmnParseError` listing every problem found."""
    try:
        root = parse_xml(data)
    except UnsafeXmlError as e:
        raise DmnParseError(resource_name, [str(e)]) from None
    ns, local = _split(root.tag)
    if local != "definitions" or ns not in DMN_NAMESPACES:
        raise DmnParseError(
            resource_name,
            [f"Expected a DMN 'definitions' element in a DMN 1.1-1.5 namespace, but found '{root.tag}'"],
        )
    reader = _Reader(ns)
    drg_id = (root.get("id") or "").strip()
    if not drg_id:
        reader.problem("Decision requirements graph", "Attribute 'id' of 'definitions' must be present and not empty")
    nodes = reader.children(root, "decision")
    if not nodes:
        reader.problem("Decision requirements graph", "the model has no decision")
    if len(nodes) > MAX_DECISIONS:
        raise DmnParseError(resource_name, [f"the model has more than {MAX_DECISIONS} decisions"])
    decisions = []
    seen: set[str] = set()
    for node in nodes:
        decision = reader.decision(node)
        if decision is None:
            continue
        if decision.id in seen:
            reader.problem(f"Decision '{decision.id}'", "the id is used by more than one decision")
        seen.add(decision.id)
        decisions.append(decision)
    for decision in decisions:
        for req in decision.required:
            if req not in seen:
                reader.problem(f"Decision '{decision.id}'", f"requires decision '{req}', which is not in the model")
    cycle = _find_cycle(decisions)
    if cycle:
        reader.problem(f"Decision '{cycle}'", "its required decisions form a cycle")
    bkms = _read_bkms(reader, root, decisions)
    if reader.problems:
        raise DmnParseError(resource_name, reader.problems)
    return m.Drg(drg_id, root.get("name") or drg_id, root.get("namespace") or "", tuple(decisions), bkms)


def _read_bkms(reader: _Reader, root: XmlElement, decisions: list[m.Decision]) -> tuple[m.BusinessKnowledgeModel, ...]:
    """The business knowledge models, checking every knowledge requirement and invocation refers to one."""
    bkms = [b for node in reader.children(root, "businessKnowledgeModel") if (b := reader.bkm(node)) is not None]
    ids = {b.id for b in bkms}
    names = {b.name for b in bkms}
    for decision in decisions:
        for req in decision.required_bkms:
            if req not in ids:
                reader.problem(
                    f"Decision '{decision.id}'", f"requires business knowledge model '{req}', which is not in the model"
                )
    for bkm in bkms:
        for req in bkm.required_bkms:
            if req not in ids:
                reader.problem(
                    f"Business knowledge model '{bkm.id}'",
                    f"requires business knowledge model '{req}', which is not in the model",
                )
    for where, name in reader.invoked:
        if name not in names:
            reader.problem(where, f"no BKM found with name '{name}'")
    by_id = {b.id: b for b in bkms}
    cycle = _find_cycle([m.Decision(b.id, b.name, m.ListLogic(()), b.required_bkms) for b in bkms])
    if cycle:
        reader.problem(f"Business knowledge model '{by_id[cycle].id}'", "its required knowledge forms a cycle")
    return tuple(bkms)


def _find_cycle(decisions: list[m.Decision]) -> str | None:
    """The id of a decision on a requirement cycle, or None (iterative depth-first search)."""
    requires = {d.id: d.required for d in decisions}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    for start in requires:
        if state.get(start):
            continue
        stack = [(start, iter(requires[start]))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif nxt in requires:
                if state.get(nxt) == 1:
                    return nxt
                if not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, iter(requires[nxt])))
    return None
