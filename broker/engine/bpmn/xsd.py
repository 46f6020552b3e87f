"""Check a BPMN resource against the BPMN 2.0 XML schema, as Zeebe's model reader does before anything else.

The schema files under ``schema/`` are the OMG BPMN 2.0 (20100524) XSDs: the semantic model (``Semantic.xsd``
included by ``BPMN20.xsd``) and the diagram interchange (``BPMNDI.xsd``, ``DI.xsd``, ``DC.xsd``). They fix which
elements exist in the ``bpmn`` namespace, their order where a sequence requires one, where each may appear, and the
types of attributes; extension elements and attributes of other namespaces (``zeebe:*``, ``modeler:*``) are checked
only where the schema says so (``lax``: not at all for namespaces it does not know).

lxml (libxml2) validates; the schema is compiled once per process, from the packaged files only (no network, no
catalog). The document is parsed again for it with DTDs, entities and network access off; :mod:`broker.safe_xml` has
already refused anything unsafe and bounded the size before this runs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

from lxml import etree  # type: ignore[import-untyped]

SCHEMA_DIR: Final = Path(__file__).resolve().parent / "schema"
# A document with more schema errors than this reports the first ones and how many more there are.
MAX_REPORTED_ERRORS: Final = 20

_NAMESPACES: Final = {
    "{http://www.omg.org/spec/BPMN/20100524/MODEL}": "bpmn:",
    "{http://www.omg.org/spec/BPMN/20100524/DI}": "bpmndi:",
    "{http://www.omg.org/spec/DD/20100524/DC}": "dc:",
    "{http://www.omg.org/spec/DD/20100524/DI}": "di:",
    "{http://camunda.org/schema/zeebe/1.0}": "zeebe:",
}


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=False,
    )


@functools.cache
def bpmn_schema() -> etree.XMLSchema:
    """The compiled BPMN 2.0 schema (compiled on first use, then shared)."""
    document = etree.parse(str(SCHEMA_DIR / "BPMN20.xsd"), _parser())
    return etree.XMLSchema(document)


def schema_violations(data: bytes) -> list[str]:
    """What in ``data`` violates the BPMN 2.0 schema, one entry each: ``(line: N, column: M): what is wrong``
    (libxml2 knows no column for most schema errors: then only the line). Empty when the document is valid.

    ``data`` must already have been accepted by :func:`broker.safe_xml.parse_xml` (well-formed, no DTD, bounded).
    """
    try:
        document = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as error:
        # safe_xml accepted the document, so this is libxml2's own bound: nesting deeper than 256 elements
        reason = error.msg
        if "depth" in reason.lower():
            reason = "the document is nested too deeply to be checked (more than 256 levels of elements)"
        return [f"({_where(error.lineno, error.offset)}): {reason}"]
    schema = bpmn_schema()
    if schema.validate(document):
        return []
    errors = list(schema.error_log)
    lines = [f"({_where(e.line, e.column)}): {_readable(e.message)}" for e in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_REPORTED_ERRORS:
        lines.append(f"… and {len(errors) - MAX_REPORTED_ERRORS} more schema violations")
    return lines


def _where(line: int, column: int) -> str:
    """``line: N, column: M`` as Zeebe words it; libxml2 knows no column for most schema errors."""
    return f"line: {line}, column: {column}" if column > 0 else f"line: {line}"


def _readable(message: str) -> str:
    """libxml2's message with namespace URIs shortened to the usual prefixes."""
    for uri, prefix in _NAMESPACES.items():
        message = message.replace(uri, prefix)
    return message
