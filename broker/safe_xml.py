"""Turn untrusted bytes into an XML tree without ever resolving DTDs or entities.

Deployments come from any client, so the XML reader is an attack surface: entity expansion
("billion laughs"), external entities (file and network reads) and sheer size. DTDs are refused
outright (BPMN never needs one), and the document size and element count are bounded before
anything larger than the input is built.
"""

from __future__ import annotations

from typing import Final
from xml.etree.ElementTree import Element as XmlElement
from xml.etree.ElementTree import ParseError, TreeBuilder

from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden  # type: ignore[import-untyped]
from defusedxml.ElementTree import DefusedXMLParser  # type: ignore[import-untyped]

DEFAULT_MAX_RESOURCE_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_XML_ELEMENTS: Final = 200_000


class UnsafeXmlError(ValueError):
    """The document cannot be read safely or is not well-formed; the message says why."""


class TooManyElementsError(UnsafeXmlError):
    """The document has more elements than the caller allowed."""


class _TooManyElements(Exception):
    """Raised from inside the parser callbacks to stop reading an oversized document early."""


class ElementCounter:
    """Elements read so far, against a limit: one document's, or several documents' that share one budget (the
    resources of a deployment). Counts whatever was read, also of documents that turn out malformed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0


class _CountingTreeBuilder(TreeBuilder):
    """A tree builder that stops once its counter passes the limit."""

    def __init__(self, counter: ElementCounter) -> None:
        super().__init__()
        self._counter = counter

    def start(self, tag: str, attrs: dict[str, str]) -> XmlElement:  # type: ignore[override]
        self._counter.count += 1
        if self._counter.count > self._counter.limit:
            raise _TooManyElements
        return super().start(tag, attrs)


def parse_xml(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
    max_elements: int = DEFAULT_MAX_XML_ELEMENTS,
    counter: ElementCounter | None = None,
) -> XmlElement:
    """The root element of ``data``.

    Raises :class:`UnsafeXmlError` for empty, oversized, malformed documents, for any DTD
    (which also rules out internal and external entities), and :class:`TooManyElementsError` for documents with more
    than ``max_elements`` elements (given a ``counter``, for taking it past its limit; ``max_elements`` is then
    unused).
    """
    if not data.strip():
        raise UnsafeXmlError("Resource is empty")
    if len(data) > max_bytes:
        raise UnsafeXmlError(f"Resource is {len(data)} bytes, larger than the allowed {max_bytes} bytes")
    parser = DefusedXMLParser(
        target=_CountingTreeBuilder(counter or ElementCounter(max_elements)),
        forbid_dtd=True,
        forbid_entities=True,
        forbid_external=True,
    )
    try:
        parser.feed(data)
        root: XmlElement = parser.close()
    except _TooManyElements:
        limit = counter.limit if counter is not None else max_elements
        raise TooManyElementsError(f"Resource has more than {limit} XML elements") from None
    except DTDForbidden:
        raise UnsafeXmlError("Document type declarations (DTDs) are not allowed in BPMN resources") from None
    except EntitiesForbidden as error:
        raise UnsafeXmlError(f"Entity declarations are not allowed in BPMN resources ({error.name!r})") from None
    except ExternalReferenceForbidden:
        raise UnsafeXmlError("External references are not allowed in BPMN resources") from None
    except DefusedXmlException as error:
        raise UnsafeXmlError(f"Resource uses an XML feature that is not allowed: {error}") from None
    except ParseError as error:
        line, column = error.position
        raise UnsafeXmlError(
            f"Resource is not well-formed XML: {_expat_reason(error)} (line {line}, column {column})"
        ) from None
    return root


def _expat_reason(error: ParseError) -> str:
    """Expat's message without its trailing position, which is reported separately."""
    message = str(error)
    reason, _, _ = message.partition(": line ")
    return reason
