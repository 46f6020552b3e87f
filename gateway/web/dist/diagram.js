// A BPMN diagram drawn by bpmn-js (vendor/bpmn-viewer.js, installed by `make web`), with Weir's state on top.

export const viewerInstalled = () => typeof window.BpmnJS === "function";

/**
 * Draws `xml` into `container`; `marks` maps an element id to {state: active|completed|incident, count}.
 * Returns the viewer, or null with a message in the container when the viewer bundle is not installed.
 */
export async function showDiagram(container, xml, marks = new Map()) {
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
