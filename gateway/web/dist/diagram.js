// A BPMN diagram drawn by bpmn-js (vendor/bpmn-viewer.js, installed by `make web`), with Weir's state on top.

export const viewerInstalled = () => typeof window.BpmnJS === "function";

const COUNT_KINDS = ["active", "incidents", "completed", "canceled"];

/**
 * Draws `xml` into `container`; `marks` maps an element id to {state: active|completed|incident, count}; `counts`
 * (a definition's statistics) to {active, incidents, completed, canceled}, each non-zero one drawn as a badge;
 * `flows` names the sequence flows taken. Returns the viewer, or null with a message in the container when the
 * viewer bundle is not installed.
 */
export async function showDiagram(container, xml, marks = new Map(), { counts = new Map(), flows = [] } = {}) {
  container.classList.add("diagram");
  if (!viewerInstalled()) {
    container.innerHTML =
      '<p class="missing">The diagram viewer is not installed: run <code>make web</code> (part of ' +
      "<code>make install</code>), which copies bpmn-js into <code>gateway/web/dist/vendor/</code>, " +
      "then reload this page.</p>";
    return null;
  }
  const viewer = new window.BpmnJS({ container });
  try {
    await viewer.importXML(xml);
  } catch (error) {
    container.innerHTML = "";
    container.textContent = `The diagram cannot be drawn: ${error.message}`;
    return null;
  }
  const canvas = viewer.get("canvas");
  const registry = viewer.get("elementRegistry");
  const overlays = viewer.get("overlays");
  canvas.zoom("fit-viewport", "auto");
  for (const [elementId, mark] of marks) {
    if (!registry.get(elementId)) continue;
    canvas.addMarker(elementId, `weir-${mark.state}`);
    if (mark.state === "active" || mark.state === "incident") {
      const badge = document.createElement("span");
      badge.className = `weir-badge weir-badge-${mark.state}`;
      badge.textContent = mark.state === "incident" ? "!" : String(mark.count || 1);
      badge.title = mark.state === "incident" ? "incident" : `${mark.count || 1} active`;
      overlays.add(elementId, { position: { bottom: 8, left: -8 }, html: badge });
    }
  }
  for (const [elementId, count] of counts) {
    if (!registry.get(elementId)) continue;
    const badges = document.createElement("span");
    badges.className = "weir-counts";
    for (const kind of COUNT_KINDS) {
      if (!count[kind]) continue;
      const badge = document.createElement("span");
      badge.className = `weir-badge weir-badge-${kind}`;
      badge.dataset.kind = kind;
      badge.textContent = String(count[kind]);
      badge.title = `${count[kind]} ${kind === "incidents" ? "with an incident" : kind}`;
      badges.append(badge);
    }
    if (badges.childElementCount) overlays.add(elementId, { position: { bottom: 8, left: -8 }, html: badges });
  }
  for (const flowId of flows) if (registry.get(flowId)) canvas.addMarker(flowId, "weir-taken");
  container.dataset.ready = "true";
  return viewer;
}

/** Element id → mark, from a process instance's element instances and open incidents. */
export function marksFrom(elementInstances, incidents) {
  const marks = new Map();
  for (const e of elementInstances) {
    if (e.type === "PROCESS") continue;
    const current = marks.get(e.elementId);
    if (e.state === "ACTIVE") {
      const count = current?.state === "active" ? current.count + 1 : 1;
      if (current?.state !== "incident") marks.set(e.elementId, { state: "active", count });
    } else if (e.state === "COMPLETED" && !current) {
      marks.set(e.elementId, { state: "completed" });
    }
  }
  for (const i of incidents) {
    if (i.state === "ACTIVE" || i.state === "PENDING") marks.set(i.elementId, { state: "incident" });
  }
  return marks;
}

/** Element id → mark, from a definition's element statistics: where instances wait, where incidents are. */
export function marksFromStatistics(items) {
  const marks = new Map();
  for (const s of items) {
    if (s.incidents) marks.set(s.elementId, { state: "incident" });
    else if (s.active) marks.set(s.elementId, { state: "active", count: s.active });
  }
  return marks;
}

const BPMN = "http://www.omg.org/spec/BPMN/20100524/MODEL";
const FLOW_NODES = new Set([
  "task", "serviceTask", "userTask", "scriptTask", "sendTask", "receiveTask", "manualTask", "businessRuleTask",
  "callActivity", "subProcess", "adHocSubProcess", "transaction", "exclusiveGateway", "parallelGateway",
  "inclusiveGateway", "eventBasedGateway", "intermediateCatchEvent", "intermediateThrowEvent", "endEvent",
  "startEvent", "boundaryEvent",
]);

/**
 * The flow nodes of a BPMN document as {id, name, type}, in document order. A token can be moved to any but a
 * start or boundary event (`movable`); a migration maps every one.
 */
export function flowNodes(xml, { movable = false } = {}) {
  const doc = new DOMParser().parseFromString(xml, "application/xml");
  return [...doc.getElementsByTagNameNS(BPMN, "*")]
    .filter((e) => FLOW_NODES.has(e.localName) && e.getAttribute("id"))
    .filter((e) => !movable || (e.localName !== "startEvent" && e.localName !== "boundaryEvent"))
    .map((e) => ({ id: e.getAttribute("id"), name: e.getAttribute("name") || "", type: e.localName }));
}
