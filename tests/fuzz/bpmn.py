"""Random but well-formed BPMN processes: a chain of blocks from a start event to an end event, each block one of
script task, task with FEEL mappings, short timer, signal throw or catch, call activity (to itself, to a sibling,
or to an id computed in FEEL), exclusive / parallel / inclusive split and join with FEEL conditions, or a loop
back to an earlier point. Start events are none, signal (so broadcasts chain) or a short repeating timer."""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from hypothesis import strategies as st

from tests.fuzz.values import FEEL, FEEL_PARSED

SIGNALS = ["fuzz-s0", "fuzz-s1", "fuzz-s2"]
HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="fuzz" targetNamespace="http://weir.test/fuzz">\n'
)


def feel_attr(expression: str) -> str:
    """An expression as an XML attribute value (characters XML cannot carry dropped: FEEL gets ``\\u`` escapes)."""
    return quoteattr("=" + _xml_safe(expression))


def _xml_safe(text: str) -> str:
    return "".join(
        ch for ch in text if ch in "\t\n\r" or " " <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd" or ch > "\uffff"
    )


@dataclass
class Graph:
    """The XML of one process being built: elements, flows, and a counter for ids."""

    process_id: str
    tag: str  # what the ids of this process's elements start with
    elements: list[str] = field(default_factory=list)
    flows: list[str] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # gateway id -> id of its default flow, not yet drawn
    n: int = 0

    def new_id(self, kind: str) -> str:
        """An element id unique in the whole document (ids are xs:ID: one namespace for all its processes)."""
        self.n += 1
        return f"{self.tag}{kind}{self.n}"

    def flow(self, source: str, target: str, condition: str | None = None) -> str:
        """A sequence flow; the unconditional flow out of a gateway with a default is that default."""
        flow_id = self.defaults.pop(source) if condition is None and source in self.defaults else self.new_id("f")
        body = ""
        if condition is not None:
            body = (
                '<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">'
                f"{escape('=' + _xml_safe(condition))}</bpmn:conditionExpression>"
            )
        self.flows.append(
            f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}">{body}</bpmn:sequenceFlow>'
        )
        return flow_id

    def add(self, xml: str) -> None:
        self.elements.append(xml)


def _script(g: Graph, expression: str) -> tuple[str, str]:
    i = g.new_id("script")
    g.add(
        f'<bpmn:scriptTask id="{i}"><bpmn:extensionElements><zeebe:script expression={feel_attr(expression)} '
        f'resultVariable="r{g.n % 2}" /></bpmn:extensionElements></bpmn:scriptTask>'
    )
    return i, i


def _mapped_task(g: Graph, source: str, output: str) -> tuple[str, str]:
    i = g.new_id("task")
    g.add(
        f'<bpmn:task id="{i}"><bpmn:extensionElements><zeebe:ioMapping>'
        f'<zeebe:input source={feel_attr(source)} target="x" />'
        f'<zeebe:output source={feel_attr(output)} target="o0" />'
        "</zeebe:ioMapping></bpmn:extensionElements></bpmn:task>"
    )
    return i, i


def _timer(g: Graph, duration: str) -> tuple[str, str]:
    i = g.new_id("timer")
    g.add(
        f'<bpmn:intermediateCatchEvent id="{i}"><bpmn:timerEventDefinition><bpmn:timeDuration>{escape(duration)}'
        "</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>"
    )
    return i, i


def _signal(g: Graph, signal: int, throw: bool) -> tuple[str, str]:
    i = g.new_id("throw" if throw else "catch")
    tag = "intermediateThrowEvent" if throw else "intermediateCatchEvent"
    g.add(f'<bpmn:{tag} id="{i}"><bpmn:signalEventDefinition signalRef="Signal_{signal}" /></bpmn:{tag}>')
    return i, i


def _call(g: Graph, called: str) -> tuple[str, str]:
    i = g.new_id("call")
    g.add(
        f'<bpmn:callActivity id="{i}"><bpmn:extensionElements><zeebe:calledElement processId={quoteattr(called)} />'
        f'<zeebe:ioMapping><zeebe:input source="=if depth = null then 1 else depth + 1" target="depth" />'
        "</zeebe:ioMapping></bpmn:extensionElements></bpmn:callActivity>"
    )
    return i, i


def _split(g: Graph, kind: str, conditions: list[str], branch_expressions: list[str]) -> tuple[str, str]:
    fork, join = g.new_id("fork"), g.new_id("join")
    branches = [_script(g, e) for e in branch_expressions]
    default = None
    if kind != "parallel":
        default = g.new_id("f")  # the last branch is the default flow: a split never has nowhere to go
    g.add(f'<bpmn:{kind}Gateway id="{fork}"' + (f' default="{default}"' if default else "") + " />")
    g.add(f'<bpmn:{kind}Gateway id="{join}" />')
    for n, (entry, exit_) in enumerate(branches):
        last = n == len(branches) - 1
        if last and default is not None:
            g.flows.append(f'<bpmn:sequenceFlow id="{default}" sourceRef="{fork}" targetRef="{entry}" />')
        else:
            g.flow(fork, entry, None if kind == "parallel" else conditions[n % len(conditions)])
        g.flow(exit_, join)
    return fork, join


@st.composite
def process(draw: st.DrawFn, process_id: str, siblings: list[str], startable: bool) -> str:
    """One process definition (the ``<bpmn:process>`` element) with id ``process_id``; with ``startable``, it has a
    none start event (a client can create an instance)."""
    g = Graph(process_id, "p" + process_id.rsplit("-", 1)[-1] + "_")
    start, end = g.new_id("start"), g.new_id("end")
    start_kind = "none" if startable else draw(st.sampled_from(["none", "signal", "timer"]))
    definition = ""
    if start_kind == "signal":
        definition = f'<bpmn:signalEventDefinition signalRef="Signal_{draw(st.integers(0, len(SIGNALS) - 1))}" />'
    elif start_kind == "timer":
        cycle = f"R{draw(st.integers(1, 3))}/PT0.{draw(st.integers(1, 9))}S"
        definition = f"<bpmn:timerEventDefinition><bpmn:timeCycle>{cycle}</bpmn:timeCycle></bpmn:timerEventDefinition>"
    g.add(f'<bpmn:startEvent id="{start}">{definition}</bpmn:startEvent>')
    previous = start
    entries: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["script", "mapped", "timer", "throw", "catch", "call", "split", "loop"]))
        if kind == "script":
            entry, exit_ = _script(g, draw(st.one_of(FEEL_PARSED, FEEL_PARSED, FEEL_PARSED, FEEL)))
        elif kind == "mapped":
            entry, exit_ = _mapped_task(g, draw(FEEL_PARSED), draw(FEEL_PARSED))
        elif kind == "timer":
            ms = draw(st.integers(1, 999))
            duration = draw(st.sampled_from([f"PT0.{ms:03d}S", "=" + _xml_safe(draw(FEEL_PARSED)), "P1D", "PT-1S"]))
            entry, exit_ = _timer(g, duration)
        elif kind in ("throw", "catch"):
            entry, exit_ = _signal(g, draw(st.integers(0, len(SIGNALS) - 1)), kind == "throw")
        elif kind == "call":
            called = draw(
                st.one_of(
                    st.sampled_from([process_id, *siblings]),
                    st.sampled_from([f'="{process_id}"', f'="{process_id}" + ""', '="fuzz-" + string(depth)']),
                    FEEL_PARSED.map(lambda e: "=" + _xml_safe(e)),
                )
            )
            entry, exit_ = _call(g, called)
        elif kind == "split":
            gateway = draw(st.sampled_from(["exclusive", "parallel", "inclusive"]))
            n = draw(st.integers(1, 3))
            conditions = draw(st.lists(FEEL_PARSED, min_size=1, max_size=2))
            entry, exit_ = _split(g, gateway, conditions, draw(st.lists(FEEL_PARSED, min_size=n, max_size=n)))
        else:  # a loop back to an earlier point, or to itself, while a FEEL condition holds
            gate = g.new_id("again")
            g.defaults[gate] = f"{gate}-on"  # the flow onward, to whatever follows
            g.add(f'<bpmn:exclusiveGateway id="{gate}" default="{gate}-on" />')
            if entries and draw(st.booleans()):
                g.flow(previous, gate)
                g.flow(gate, draw(st.sampled_from(entries)), draw(FEEL_PARSED))
            else:
                merge = g.new_id("merge")
                g.add(f'<bpmn:exclusiveGateway id="{merge}" />')
                g.flow(previous, merge)
                bump, _ = _script(g, "if loop = null then 1 else loop + 1")
                g.flow(merge, bump)
                g.flow(bump, gate)
                bound = draw(st.integers(0, 10**6))
                g.flow(gate, merge, draw(st.one_of(st.just(f"loop < {bound}"), FEEL)))
            previous = gate
            continue
        g.flow(previous, entry)
        entries.append(entry)
        previous = exit_
    g.add(f'<bpmn:endEvent id="{end}" />')
    g.flow(previous, end)
    flows = g.flows
    body = "\n".join(g.elements + flows)
    return f'<bpmn:process id="{process_id}" isExecutable="true">\n{body}\n</bpmn:process>\n'


@st.composite
def definitions(draw: st.DrawFn, prefix: str) -> tuple[bytes, list[str]]:
    """A deployment of one to three processes that may call each other; returns the XML and the process ids (a
    client can start the first)."""
    ids = [f"{prefix}-{n}" for n in range(draw(st.integers(1, 3)))]
    processes = [draw(process(pid, [o for o in ids if o != pid], startable=n == 0)) for n, pid in enumerate(ids)]
    signals = "".join(f'<bpmn:signal id="Signal_{n}" name="{name}" />\n' for n, name in enumerate(SIGNALS))
    return (HEAD + "".join(processes) + signals + "</bpmn:definitions>\n").encode(), ids
