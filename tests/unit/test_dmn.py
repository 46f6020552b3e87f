"""The DMN parser and evaluator: one small table per hit policy, literal expressions, required decisions, and the
models deployment must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.dmn import DmnParseError, evaluate_decision, parse_dmn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dmn"
DMN13 = "https://www.omg.org/spec/DMN/20191111/MODEL/"


def _table(
    rules: list[tuple[str, ...]],
    *,
    hit_policy: str = "UNIQUE",
    aggregation: str | None = None,
    outputs: tuple[tuple[str, str], ...] = (("result", ""),),
    inputs: tuple[str, ...] = ("x",),
    ns: str = DMN13,
) -> bytes:
    """A one-decision DRG ('d'): each rule is its input entries followed by its output entries."""
    agg = f' aggregation="{aggregation}"' if aggregation else ""
    ins = "".join(
        f'<input id="i{n}" label="In {n}"><inputExpression><text>{e}</text></inputExpression></input>'
        for n, e in enumerate(inputs)
    )
    outs = "".join(
        f'<output id="o{n}" name="{name}">'
        + (f"<outputValues><text>{values}</text></outputValues>" if values else "")
        + "</output>"
        for n, (name, values) in enumerate(outputs)
    )
    body = ""
    for n, rule in enumerate(rules):
        entries = "".join(f"<inputEntry><text>{t}</text></inputEntry>" for t in rule[: len(inputs)])
        results = "".join(f"<outputEntry><text>{t}</text></outputEntry>" for t in rule[len(inputs) :])
        body += f'<rule id="r{n + 1}">{entries}{results}</rule>'
    return (
        f'<definitions xmlns="{ns}" id="drg" name="DRG" namespace="x"><decision id="d" name="D">'
        f'<decisionTable hitPolicy="{hit_policy}"{agg}>{ins}{outs}{body}</decisionTable></decision></definitions>'
    ).encode()


def _eval(data: bytes, variables: dict, decision: str = "d"):
    return evaluate_decision(parse_dmn(data), decision, variables)


def test_unique_one_match_and_no_match() -> None:
    data = _table([("&lt; 10", '"small"'), ("&gt;= 10", '"big"')])
    result = _eval(data, {"x": 12})
    assert not result.failed and result.output == "big"
    [evaluated] = result.evaluated
    assert evaluated.inputs == [("i0", "In 0", 12)]
    assert [(r.rule_id, r.rule_index, r.outputs) for r in evaluated.matched_rules] == [
        ("r2", 2, [("o0", "result", "big")])
    ]
    assert _eval(data, {"x": None}).output is None


def test_unique_several_matches_fail_naming_the_decision() -> None:
    result = _eval(_table([("&gt; 1", "1"), ("&gt; 2", "2")]), {"x": 5})
    assert result.failed and result.failed_decision_id == "d"
    assert result.failure_message == (
        "Expected to evaluate decision 'd', but multiple values aren't allowed for UNIQUE hit policy, but rules "
        "'r1', 'r2' matched. found: '[1,2]'"
    )


def test_first_takes_the_first_match_in_table_order() -> None:
    result = _eval(_table([("&gt; 1", '"a"'), ("&gt; 2", '"b"')], hit_policy="FIRST"), {"x": 5})
    assert result.output == "a"
    assert [r.rule_id for r in result.evaluated[0].matched_rules] == ["r1"]


def test_priority_ranks_by_output_values() -> None:
    data = _table(
        [("&gt; 1", '"low"'), ("&gt; 2", '"high"'), ("-", '"medium"')],
        hit_policy="PRIORITY",
        outputs=(("risk", '"high","medium","low"'),),
    )
    assert _eval(data, {"x": 5}).output == "high"
    assert _eval(data, {"x": 0}).output == "medium"


def test_any_needs_equal_outputs() -> None:
    data = _table([("&gt; 1", '"ok"'), ("&gt; 2", '"ok"'), ("&gt; 8", '"no"')], hit_policy="ANY")
    assert _eval(data, {"x": 5}).output == "ok"
    failed = _eval(data, {"x": 9})
    assert failed.failed and 'different values aren\'t allowed for ANY hit policy. found: \'["ok","no"]\'' in (
        failed.failure_message
    )


@pytest.mark.parametrize(
    ("aggregation", "expected"), [(None, [1, 2, 4]), ("SUM", 7), ("MIN", 1), ("MAX", 4), ("COUNT", 3)]
)
def test_collect_with_and_without_aggregation(aggregation: str | None, expected: object) -> None:
    data = _table(
        [("&gt; 0", "1"), ("&gt; 1", "2"), ("&gt; 100", "3"), ("-", "4")], hit_policy="COLLECT", aggregation=aggregation
    )
    assert _eval(data, {"x": 5}).output == expected


@pytest.mark.parametrize("hit_policy", ["UNIQUE", "COLLECT", "RULE ORDER"])
def test_no_match_gives_null_whatever_the_hit_policy(hit_policy: str) -> None:
    assert _eval(_table([("&gt; 100", "1")], hit_policy=hit_policy), {"x": 5}).output is None
    counted = _table([("&gt; 100", "1")], hit_policy="COLLECT", aggregation="COUNT")
    assert _eval(counted, {"x": 5}).output is None


def test_no_match_gives_the_default_output_entries() -> None:
    data = (
        f'<definitions xmlns="{DMN13}" id="drg" namespace="x"><decision id="d"><decisionTable hitPolicy="COLLECT">'
        '<input id="i"><inputExpression><text>x</text></inputExpression></input>'
        '<output id="o1" name="a"><defaultOutputEntry><text>"none"</text></defaultOutputEntry></output>'
        '<output id="o2" name="b"><defaultOutputEntry><text>x * 2</text></defaultOutputEntry></output>'
        '<rule id="r"><inputEntry><text>&gt; 100</text></inputEntry><outputEntry><text>"big"</text></outputEntry>'
        "<outputEntry><text>1</text></outputEntry></rule></decisionTable></decision></definitions>"
    ).encode()
    result = _eval(data, {"x": 5})
    assert result.output == {"a": "none", "b": 10} and result.evaluated[0].matched_rules == []
    assert _eval(data, {"x": 500}).output == [{"a": "big", "b": 1}]


def test_matched_rules_are_every_match_in_table_order() -> None:
    data = _table(
        [("&gt; 1", '"low"'), ("&gt; 2", '"high"')], hit_policy="PRIORITY", outputs=(("risk", '"high","low"'),)
    )
    result = _eval(data, {"x": 5})
    assert result.output == "high"
    assert [r.rule_id for r in result.evaluated[0].matched_rules] == ["r1", "r2"]


def test_collect_sum_of_text_fails() -> None:
    data = _table([("-", '"a"')], hit_policy="COLLECT", aggregation="SUM")
    assert "expected number but found '\"a\"'" in _eval(data, {"x": 1}).failure_message


def test_rule_order_lists_every_match_in_table_order() -> None:
    data = _table([("&gt; 3", '"c"'), ("&gt; 1", '"a"'), ("&gt; 9", '"z"')], hit_policy="RULE ORDER")
    result = _eval(data, {"x": 5})
    assert result.output == ["c", "a"]
    assert [r.rule_index for r in result.evaluated[0].matched_rules] == [1, 2]


def test_output_order_sorts_by_output_values() -> None:
    data = _table(
        [("&gt; 1", '"low"'), ("&gt; 2", '"high"'), ("-", '"medium"')],
        hit_policy="OUTPUT ORDER",
        outputs=(("risk", '"high","medium","low"'),),
    )
    assert _eval(data, {"x": 5}).output == ["high", "medium", "low"]


def test_several_outputs_give_a_context_per_rule() -> None:
    data = _table(
        [("&gt; 1", '"a"', "x * 2"), ("&lt;= 1", '"b"', "0")],
        outputs=(("name", ""), ("score", "")),
    )
    assert _eval(data, {"x": 5}).output == {"name": "a", "score": 10}
    collected = _table(
        [("-", '"a"', "1"), ("-", '"b"', "2")], hit_policy="RULE ORDER", outputs=(("name", ""), ("score", ""))
    )
    assert _eval(collected, {"x": 0}).output == [{"name": "a", "score": 1}, {"name": "b", "score": 2}]


def test_several_inputs_and_unary_test_forms() -> None:
    data = _table(
        [('"a","b"', "[1..5]", '"first"'), ('not("a")', "-", '"second"'), ("-", "? &gt; 100", '"third"')],
        inputs=("kind", "amount"),
        hit_policy="FIRST",
    )
    assert _eval(data, {"kind": "b", "amount": 3}).output == "first"
    assert _eval(data, {"kind": "c", "amount": 300}).output == "second"
    assert _eval(data, {"kind": "a", "amount": 300}).output == "third"
    assert _eval(data, {"kind": "a", "amount": 50}).output is None


def test_input_entries_see_the_variables() -> None:
    data = _table([("&lt; limit", '"under"'), ("&gt;= limit", '"over"')])
    assert _eval(data, {"x": 5, "limit": 3}).output == "over"


def test_required_decisions_evaluate_first_and_are_visible_by_id() -> None:
    drg = parse_dmn((FIXTURES / "discount.dmn").read_bytes(), "discount.dmn")
    result = evaluate_decision(drg, "discount", {"orders": 4, "total": 70})
    assert not result.failed
    assert [e.decision.id for e in result.evaluated] == ["customer_level", "discount"]
    assert result.evaluated[0].output == "silver"
    assert result.evaluated[1].inputs == [("in_level", "Customer level", "silver"), ("in_total", "Order total", 70)]
    assert result.output == 0.05


def test_required_decision_unique_failure_names_the_failing_decision() -> None:
    drg = parse_dmn((FIXTURES / "discount.dmn").read_bytes(), "discount.dmn")
    ok = evaluate_decision(drg, "discount", {"orders": 12, "total": 10})
    assert ok.output == 0.15
    failed = evaluate_decision(drg, "discount", {"orders": 4, "total": 120})
    assert failed.failed_decision_id == "discount"
    # the failed decision is listed last, with the inputs it evaluated and the rules that matched
    assert [e.decision.id for e in failed.evaluated] == ["customer_level", "discount"]
    assert failed.evaluated[-1].inputs == [("in_level", "Customer level", "silver"), ("in_total", "Order total", 120)]
    assert [r.rule_id for r in failed.evaluated[-1].matched_rules] == ["silver_rule", "silver_any"]
    assert failed.evaluated[-1].output is None


def test_required_decision_results_are_named_by_their_variable() -> None:
    data = (
        f'<definitions xmlns="{DMN13}" id="g" namespace="x">'
        '<decision id="base"><variable name="baseValue"/><literalExpression><text>20</text></literalExpression>'
        '</decision><decision id="top"><informationRequirement><requiredDecision href="#base"/>'
        "</informationRequirement><literalExpression><text>baseValue + 1</text></literalExpression></decision>"
        "</definitions>"
    ).encode()
    assert evaluate_decision(parse_dmn(data), "top", {}).output == 21


def test_literal_expression_decision() -> None:
    drg = parse_dmn((FIXTURES / "greeting.dmn").read_bytes(), "greeting.dmn")
    result = evaluate_decision(drg, "greeting", {"name": "Ada"})
    assert result.output == "Hello Ada"
    assert result.evaluated[0].decision.decision_type == "LITERAL_EXPRESSION"


@pytest.mark.parametrize(
    "ns",
    [
        "http://www.omg.org/spec/DMN/20151101/dmn.xsd",
        "http://www.omg.org/spec/DMN/20180521/MODEL/",
        "https://www.omg.org/spec/DMN/20191111/MODEL/",
        "https://www.omg.org/spec/DMN/20211108/MODEL/",
        "https://www.omg.org/spec/DMN/20230324/MODEL/",
    ],
)
def test_every_dmn_namespace_is_read(ns: str) -> None:
    assert parse_dmn(_table([("-", "1")], ns=ns)).decisions[0].id == "d"


def test_unknown_decision_is_a_failure() -> None:
    result = _eval(_table([("-", "1")]), {}, decision="nope")
    assert result.failed_decision_id == "nope"
    assert "no decision found for id 'nope'" in result.failure_message


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<definitions xmlns='http://www.omg.org/spec/BPMN/20100524/MODEL' id='x'/>", "DMN 'definitions'"),
        (b"not xml", "not well-formed"),
        (b'<!DOCTYPE x [<!ENTITY e "x">]><definitions/>', "DTD"),
        (_table([("-", "1")], hit_policy="SOMETIMES"), "unknown hit policy 'SOMETIMES'"),
        (_table([("-", "1")], aggregation="SUM"), "aggregation 'SUM' needs hit policy COLLECT"),
        (_table([("&gt;&gt; 3", "1")]), "failed to parse unary tests"),
        (_table([("-", "1 +")]), "failed to parse expression"),
        (_table([("-",)]), "has 1 input and 0 output entries"),
        (_table([("-", "1")], hit_policy="PRIORITY"), "needs output values"),
        (
            f'<definitions xmlns="{DMN13}" id="g"><decision id="a"><informationRequirement><requiredDecision '
            f'href="#b"/></informationRequirement><literalExpression><text>1</text></literalExpression></decision>'
            f'<decision id="b"><informationRequirement><requiredDecision href="#a"/></informationRequirement>'
            f"<literalExpression><text>1</text></literalExpression></decision></definitions>".encode(),
            "form a cycle",
        ),
        (
            f'<definitions xmlns="{DMN13}" id="g"><decision id="a"><informationRequirement><requiredDecision '
            f'href="#zz"/></informationRequirement><literalExpression><text>1</text></literalExpression>'
            f"</decision></definitions>".encode(),
            "requires decision 'zz'",
        ),
        (f'<definitions xmlns="{DMN13}" id="g"/>'.encode(), "has no decision"),
    ],
)
def test_invalid_models_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(DmnParseError) as info:
        parse_dmn(data, "bad.dmn")
    assert reason in str(info.value)
    assert str(info.value).startswith("'bad.dmn': ")


# -- typeRef, business knowledge models, boxed contexts, relations and lists --------------------------------------


def _boxed() -> object:
    return parse_dmn((FIXTURES / "boxed.dmn").read_bytes(), "boxed.dmn")


def _decision(body: str, extra: str = "") -> bytes:
    """A DRG with one decision 'd' whose content (variable, requirements, logic) is ``body``; ``extra`` holds
    further DRG elements (business knowledge models)."""
    return (
        f'<definitions xmlns="{DMN13}" id="g" namespace="x">{extra}<decision id="d">{body}</decision></definitions>'
    ).encode()


def test_variable_type_ref_accepts_its_type_and_null() -> None:
    drg = _boxed()
    result = evaluate_decision(drg, "dueDate", {})
    assert not result.failed and result.output == "2024-01-02"
    assert evaluate_decision(drg, "price", {"amount": 150}).output == 135
    typed = _decision('<variable name="d" typeRef="feel:string"/><literalExpression><text>x</text></literalExpression>')
    assert _eval(typed, {"x": None}).output is None
    assert _eval(typed, {"x": "a"}).output == "a"


@pytest.mark.parametrize(
    ("type_ref", "expression", "found"),
    [
        ("number", '"amount " + string(amount)', "ValString(amount 1)"),
        ("string", "amount", "ValNumber(1)"),
        ("boolean", "amount", "ValNumber(1)"),
        ("date", 'date and time("2024-01-01T10:00:00")', "ValDateTime(2024-01-01T10:00:00)"),
        ("dateTime", 'date("2024-01-01")', "ValDate(2024-01-01)"),
        ("time", "true", "ValBoolean(true)"),
        ("dayTimeDuration", 'duration("P1Y")', "ValYearMonthDuration(P1Y)"),
        ("yearMonthDuration", 'duration("P1D")', "ValDayTimeDuration(P1D)"),
    ],
)
def test_a_result_not_of_its_type_ref_fails_naming_the_decision(type_ref: str, expression: str, found: str) -> None:
    data = _decision(
        f'<variable name="d" typeRef="{type_ref}"/><literalExpression><text>{expression}</text></literalExpression>'
    )
    result = _eval(data, {"amount": 1})
    assert result.failed and result.failed_decision_id == "d" and result.output is None
    assert result.failure_message == f"Expected to evaluate decision 'd', but expected '{type_ref}' but found '{found}'"


def test_type_ref_of_a_decision_table_result_and_unknown_type_refs() -> None:
    table = (
        '<variable name="d" typeRef="string"/><decisionTable><input id="i"><inputExpression><text>x</text>'
        '</inputExpression></input><output id="o" name="o" typeRef="string"/><rule id="r"><inputEntry><text>-</text>'
        "</inputEntry><outputEntry><text>x</text></outputEntry></rule></decisionTable>"
    )
    assert _eval(_decision(table), {"x": "a"}).output == "a"
    failed = _eval(_decision(table), {"x": 2})
    assert failed.failure_message.endswith("expected 'string' but found 'ValNumber(2)'")
    assert [r.outputs for r in failed.evaluated[0].matched_rules] == [[("o", "o", 2)]]
    custom = _decision('<variable name="d" typeRef="tCustomer"/><literalExpression><text>1</text></literalExpression>')
    assert _eval(custom, {}).output == 1


def test_bkm_called_by_name_from_a_literal_expression() -> None:
    drg = _boxed()
    result = evaluate_decision(drg, "price", {"amount": 200})
    assert not result.failed and result.output == 180  # net() calls discount(), its own required knowledge
    assert result.evaluated[0].decision.required_bkms == ("netBkm",)
    bkm = drg.bkm("discountBkm")
    assert bkm is not None and [(p.name, p.type_ref) for p in bkm.parameters] == [
        ("amount", "number"),
        ("rate", "number"),
    ]


def test_bkm_argument_of_the_wrong_type_fails_the_decision() -> None:
    result = evaluate_decision(_boxed(), "price", {"amount": "ten"})
    assert result.failed and result.failed_decision_id == "price"
    assert result.failure_message == (
        "Expected to evaluate decision 'price', but failed to evaluate expression 'net(amount)': "
        "expected 'number' but found 'ValString(ten)'"
    )


def test_invocation_binds_parameters_and_evaluates_the_bkm_table() -> None:
    drg = _boxed()
    gold = evaluate_decision(drg, "customerTier", {"amount": 100})
    assert gold.output == "gold" and gold.evaluated[0].decision.decision_type == "INVOCATION"
    assert evaluate_decision(drg, "customerTier", {"amount": 5}).output == "silver"
    wrong = evaluate_decision(drg, "customerTier", {"amount": "5"})
    assert (
        wrong.failure_message
        == "Expected to evaluate decision 'customerTier', but expected 'number' but found 'ValString(5)'"
    )


def test_invocation_without_a_value_for_a_parameter_fails() -> None:
    bkm = (
        '<businessKnowledgeModel id="b" name="twice"><encapsulatedLogic><formalParameter name="n"/>'
        "<literalExpression><text>n * 2</text></literalExpression></encapsulatedLogic></businessKnowledgeModel>"
    )
    invocation = "<invocation><literalExpression><text>twice</text></literalExpression></invocation>"
    result = _eval(_decision(invocation, bkm), {})
    assert result.failure_message == "Expected to evaluate decision 'd', but no parameter found with name 'n'"
    assert _eval(_decision(invocation, bkm), {"n": 4}).output == 8


def test_context_decision_with_a_result_entry_and_a_boxed_function() -> None:
    result = evaluate_decision(_boxed(), "offer", {"amount": 150})
    assert not result.failed
    assert result.output == {"tier": "gold", "doubled": 300}
    assert [e.decision.id for e in result.evaluated] == ["customerTier", "offer"]
    assert result.evaluated[1].decision.decision_type == "CONTEXT"


def test_context_decision_without_a_result_entry_is_the_context_of_its_entries() -> None:
    result = evaluate_decision(_boxed(), "limits", {"amount": 10})
    assert result.output == {"low": 5, "high": 20}


def test_relation_and_list_decisions() -> None:
    drg = _boxed()
    relation = evaluate_decision(drg, "rates", {})
    assert relation.output == [{"name": "standard", "rate": 0.1}, {"name": "member", "rate": 0.2}]
    assert relation.evaluated[0].decision.decision_type == "RELATION"
    listed = evaluate_decision(drg, "amounts", {"amount": 3})
    assert listed.output == [3, 6] and listed.evaluated[0].decision.decision_type == "LIST"


def test_a_failing_entry_of_a_context_fails_the_decision() -> None:
    context = (
        '<context><contextEntry><variable name="a"/><literalExpression><text>assert(x, x &gt; 1)</text>'
        "</literalExpression></contextEntry></context>"
    )
    result = _eval(_decision(context), {"x": 0})
    assert result.failed and result.failed_decision_id == "d"
    assert result.failure_message.startswith("Expected to evaluate decision 'd', but failed to evaluate expression")


def test_bkm_results_reach_decision_tables_in_contexts() -> None:
    bkm = (
        '<businessKnowledgeModel id="b" name="inc"><encapsulatedLogic><formalParameter name="n" typeRef="number"/>'
        "<literalExpression><text>n + 1</text></literalExpression></encapsulatedLogic></businessKnowledgeModel>"
    )
    body = (
        '<knowledgeRequirement><requiredKnowledge href="#b"/></knowledgeRequirement><context><contextEntry>'
        '<variable name="y"/><literalExpression><text>inc(x)</text></literalExpression></contextEntry><contextEntry>'
        '<decisionTable><input id="i"><inputExpression><text>y</text></inputExpression></input><output id="o"/>'
        '<rule id="r"><inputEntry><text>&gt; 1</text></inputEntry><outputEntry><text>inc(y)</text></outputEntry></rule>'
        "</decisionTable></contextEntry></context>"
    )
    assert _eval(_decision(body, bkm), {"x": 1}).output == 3
    assert _eval(_decision(body, bkm), {"x": 0}).output is None


_BKM_TWICE = (
    '<businessKnowledgeModel id="b" name="twice"><encapsulatedLogic><formalParameter name="n"/>'
    "<literalExpression><text>n * 2</text></literalExpression></encapsulatedLogic></businessKnowledgeModel>"
)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            _decision("<invocation><literalExpression><text>nope</text></literalExpression></invocation>", _BKM_TWICE),
            "no BKM found with name 'nope'",
        ),
        (
            _decision(
                '<knowledgeRequirement><requiredKnowledge href="#zz"/></knowledgeRequirement>'
                "<literalExpression><text>1</text></literalExpression>"
            ),
            "requires business knowledge model 'zz'",
        ),
        (
            _decision("<literalExpression><text>1</text></literalExpression>", '<businessKnowledgeModel id="b"/>'),
            "Attribute 'name' must be present",
        ),
        (
            _decision(
                '<context><contextEntry><variable name="f"/><functionDefinition><formalParameter name="for"/>'
                "<literalExpression><text>1</text></literalExpression></functionDefinition></contextEntry></context>"
            ),
            "parameters need names that are FEEL names",
        ),
        (
            _decision(
                "<literalExpression><text>1</text></literalExpression>",
                '<businessKnowledgeModel id="a" name="a"><knowledgeRequirement><requiredKnowledge href="#c"/>'
                '</knowledgeRequirement></businessKnowledgeModel><businessKnowledgeModel id="c" name="c">'
                '<knowledgeRequirement><requiredKnowledge href="#a"/></knowledgeRequirement></businessKnowledgeModel>',
            ),
            "its required knowledge forms a cycle",
        ),
        (
            _decision("<functionDefinition><literalExpression><text>1</text></literalExpression></functionDefinition>"),
            "a function definition is not supported as decision logic",
        ),
        (_decision("<conditional/>"), "the element 'conditional' is not supported as decision logic"),
        (_decision("<variable name='d'/>"), "the decision has no decision logic"),
        (
            _decision('<context><contextEntry><variable name="a"/><filter/></contextEntry></context>'),
            "the element 'filter' is not supported as decision logic",
        ),
        (
            _decision(
                '<relation><column name="a"/><column name="b"/><row><literalExpression><text>1</text>'
                "</literalExpression></row></relation>"
            ),
            "expected row with '2' elements but found '1'",
        ),
        (
            _decision(
                "<context><contextEntry><literalExpression><text>1</text></literalExpression></contextEntry>"
                '<contextEntry><variable name="a"/><literalExpression><text>1</text></literalExpression>'
                "</contextEntry></context>"
            ),
            "only the last context entry may have no variable",
        ),
        (
            _decision("<list><literalExpression><text>1 +</text></literalExpression></list>"),
            "failed to parse expression '1 +'",
        ),
    ],
)
def test_invalid_boxed_expressions_are_refused_naming_the_element(data: bytes, reason: str) -> None:
    with pytest.raises(DmnParseError) as info:
        parse_dmn(data, "bad.dmn")
    assert reason in str(info.value)


def test_bkm_with_a_decision_table_called_from_feel() -> None:
    body = (
        '<knowledgeRequirement><requiredKnowledge href="#tierBkm"/></knowledgeRequirement>'
        "<literalExpression><text>for a in amounts return tier(a)</text></literalExpression>"
    )
    drg = _boxed()
    bkm_xml = (FIXTURES / "boxed.dmn").read_text()
    start = bkm_xml.index('<businessKnowledgeModel id="tierBkm"')
    end = bkm_xml.index("</businessKnowledgeModel>", start) + len("</businessKnowledgeModel>")
    assert drg.bkm("tierBkm") is not None
    result = _eval(_decision(body, bkm_xml[start:end]), {"amounts": [5, 100, None]})
    assert not result.failed and result.output == ["silver", "gold", "silver"]


def test_bkm_calls_spend_the_budget_of_the_expression_calling_them() -> None:
    """Each call alone is cheap; a thousand of them in one expression exceed its step budget together."""
    bkm = (
        '<businessKnowledgeModel id="b" name="work"><encapsulatedLogic><formalParameter name="n"/>'
        "<literalExpression><text>count(for j in 1..1000 return j) + n</text></literalExpression>"
        "</encapsulatedLogic></businessKnowledgeModel>"
    )
    required = '<knowledgeRequirement><requiredKnowledge href="#b"/></knowledgeRequirement>'
    once = _decision(required + "<literalExpression><text>work(1)</text></literalExpression>", bkm)
    assert _eval(once, {}).output == 1001
    many = _decision(
        required + "<literalExpression><text>sum(for i in 1..1000 return work(i))</text></literalExpression>", bkm
    )
    result = evaluate_decision(parse_dmn(many), "d", {})
    assert result.failed and "exceeded the step budget" in result.failure_message


def test_bkms_are_callable_from_input_and_output_entries() -> None:
    body = (
        '<knowledgeRequirement><requiredKnowledge href="#b"/></knowledgeRequirement><decisionTable hitPolicy="FIRST">'
        '<input id="i"><inputExpression><text>x</text></inputExpression></input><output id="o"/>'
        '<rule id="r1"><inputEntry><text>&lt; twice(limit)</text></inputEntry><outputEntry><text>twice(x)</text>'
        '</outputEntry></rule><rule id="r2"><inputEntry><text>-</text></inputEntry><outputEntry><text>0</text>'
        "</outputEntry></rule></decisionTable>"
    )
    data = _decision(body, _BKM_TWICE)
    assert _eval(data, {"x": 3, "limit": 2}).output == 6
    assert _eval(data, {"x": 4, "limit": 2}).output == 0


def test_a_bkm_whose_name_has_spaces_is_invoked() -> None:
    bkm = _BKM_TWICE.replace('name="twice"', 'name="Twice the value"')
    invocation = (
        "<invocation><literalExpression><text>Twice the value</text></literalExpression><binding>"
        '<parameter name="n"/><literalExpression><text>x + 1</text></literalExpression></binding></invocation>'
    )
    assert _eval(_decision(invocation, bkm), {"x": 4}).output == 10
