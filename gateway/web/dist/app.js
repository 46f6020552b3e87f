// Weir's web view: what is deployed, what runs, where it waits, what failed, and the tasks people work on.
// Pages are chosen by the URL fragment (#/instances, #/instance/KEY, …); every figure comes from the REST API v2.

import {
  ApiError,
  call,
  currentGroups,
  currentUser,
  get,
  loadAuth,
  patch,
  post,
  processXml,
  saveAuth,
  search,
  searchPage,
  whoIs,
} from "./api.js";
import { flowNodes, marksFrom, marksFromStatistics, showDiagram } from "./diagram.js";

const view = document.getElementById("view");

// -- small DOM helpers (text goes through textContent: names and variable values are data, never markup) --

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const link = (href, text) => h("a", { href }, text);
const time = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const stateTag = (state) => h("span", { class: `state state-${String(state).toLowerCase()}` }, state);

function table(columns, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, columns.map(([title]) => h("th", {}, title)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row)))))),
  );
}

function notify(message, kind = "error") {
  const notice = document.getElementById("notice");
  notice.textContent = message;
  notice.className = kind;
  notice.hidden = !message;
}

const SETTLE_POLL_MS = 250;
const SETTLE_MAX_MS = 20000;

/**
 * Runs an action from a button, then redraws the page once `settled()` says the history shows its effect: the
 * searches answer from the history store, which trails the engine by the time it takes to export.
 */
async function act(button, action, settled) {
  button.disabled = true;
  view.dataset.busy = "true";
  try {
    await action();
    notify("");
    const deadline = Date.now() + SETTLE_MAX_MS;
    while (!(await settled().catch(() => false))) {
      if (Date.now() > deadline) {
        notify("Done; the history has not caught up yet — the page shows the effect once it has.", "info");
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
    }
  } catch (error) {
    notify(error.message);
  }
  await route();
  delete view.dataset.busy;
}

// -- pages --

async function processesPage() {
  const definitions = await search("process-definitions", {}, { sort: [{ field: "processDefinitionId" }] });
  return [
    h("h1", {}, "Process definitions"),
    table(
      [
        ["Process", (d) => link(`#/process/${d.processDefinitionKey}`, d.name || d.processDefinitionId)],
        ["Id", (d) => d.processDefinitionId],
        ["Version", (d) => d.version],
        ["Resource", (d) => d.resourceName],
        ["Key", (d) => d.processDefinitionKey],
      ],
      definitions,
      "No process deployed yet: deploy one with `weir deploy FILE.bpmn`.",
    ),
  ];
}

async function processPage(key) {
  const [definition, xml, instances, statistics] = await Promise.all([
    get(`/v2/process-definitions/${key}`),
    processXml(key),
    search("process-instances", { processDefinitionKey: key }, { sort: [{ field: "startDate", order: "DESC" }] }),
    post(`/v2/process-definitions/${key}/statistics/element-instances`, { filter: {} }),
  ]);
  const running = instances.filter((i) => i.state === "ACTIVE");
  const diagram = h("div", { id: "diagram" });
  const counts = new Map(statistics.items.map((s) => [s.elementId, s]));
  afterDrawing.push(() => showDiagram(diagram, xml, marksFromStatistics(statistics.items), { counts }));
  return [
    h("h1", {}, `${definition.name || definition.processDefinitionId} (version ${definition.version})`),
    h("p", { class: "meta" }, "What the instances did at each element: the badges count them."),
    diagram,
    h(
      "p",
      { class: "legend" },
      ["active", "incidents", "completed", "canceled"].map((kind) => h("span", { class: `count ${kind}` }, kind)),
    ),
    h("h2", {}, `Instances (${running.length} running of ${instances.length})`),
    instancesTable(instances),
  ];
}

function instancesTable(instances, { selectable = false } = {}) {
  const columns = [
    ["Instance", (i) => link(`#/instance/${i.processInstanceKey}`, i.processInstanceKey)],
    ["Process", (i) => i.processDefinitionName || i.processDefinitionId],
    ["Version", (i) => i.processDefinitionVersion],
    ["Business id", (i) => i.businessId || ""],
    ["Tags", (i) => tagList(i.tags)],
    ["State", (i) => [stateTag(i.state), i.hasIncident ? h("span", { class: "state state-incident" }, "INCIDENT") : ""]],
    ["Started", (i) => time(i.startDate)],
    ["Ended", (i) => time(i.endDate)],
  ];
  if (selectable) columns.unshift(["", selectBox]);
  return table(columns, instances, "No process instance matches: start one with `weir create PROCESS_ID`.");
}

/** An instance's tags, each as a small label. */
function tagList(tags) {
  return (tags || []).map((t) => h("span", { class: "tag" }, t));
}

// -- the instance list: filters and pages in the URL (#/instances?state=ACTIVE&from=20), a selection for batches --

const PAGE_SIZE = 20;
const FILTER_FIELDS = ["state", "process", "version", "incidents", "startedFrom", "startedTo", "businessId"];
const selected = new Set(); // instance keys picked for a batch operation, kept across pages and redraws
let batch = null; // the batch operation last started here: {key, type, state, counts…} or {unavailable}

function selectBox(instance) {
  const key = instance.processInstanceKey;
  const box = h("input", {
    type: "checkbox",
    class: "select",
    "data-instance": key,
    "aria-label": `Select instance ${key}`,
    checked: selected.has(key) ? "" : null,
  });
  box.addEventListener("change", () => {
    if (box.checked) selected.add(key);
    else selected.delete(key);
    showSelection();
  });
  return box;
}

/** The search filter (Camunda's process instance filter) the list's parameters name. */
function instanceFilter(params) {
  const filter = {};
  if (params.get("state")) filter.state = params.get("state");
  if (params.get("process")) filter.processDefinitionId = params.get("process");
  if (params.get("version")) filter.processDefinitionVersion = Number(params.get("version"));
  if (params.get("incidents") === "true") filter.hasIncident = true;
  if (params.get("businessId")) filter.businessId = params.get("businessId");
  const range = {};
  const instant = (name) => {
    const date = new Date(params.get(name) || "invalid"); // a local date and time, as the date inputs give it
    return Number.isNaN(date.getTime()) ? null : date.toISOString();
  };
  if (instant("startedFrom")) range.$gte = instant("startedFrom");
  if (instant("startedTo")) range.$lte = instant("startedTo");
  if (Object.keys(range).length) filter.startDate = range;
  return filter;
}

function filterForm(params, processIds) {
  const value = (name) => params.get(name) || "";
  const field = (label, control) => h("label", {}, label, control);
  const options = (pairs, chosen) => pairs.map(([v, text]) => h("option", { value: v, selected: v === chosen ? "" : null }, text));
  const form = h(
    "form",
    { id: "instance-filter", class: "filters", "aria-label": "Filter instances" },
    field(
      "State",
      h("select", { name: "state" }, options([["", "any"], ["ACTIVE", "active"], ["COMPLETED", "completed"], ["TERMINATED", "canceled"]], value("state"))),
    ),
    field("Process", h("select", { name: "process" }, options([["", "any"], ...processIds.map((id) => [id, id])], value("process")))),
    field("Version", h("input", { name: "version", type: "number", min: "1", value: value("version"), size: "4" })),
    h("label", { class: "check" }, h("input", { name: "incidents", type: "checkbox", value: "true", checked: value("incidents") ? "" : null }), "With incidents"),
    field("Started from", h("input", { name: "startedFrom", type: "datetime-local", value: value("startedFrom") })),
    field("Started until", h("input", { name: "startedTo", type: "datetime-local", value: value("startedTo") })),
    field("Business id", h("input", { name: "businessId", value: value("businessId") })),
    h("button", { type: "submit" }, "Apply"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const name of FILTER_FIELDS) {
      const v = String(new FormData(form).get(name) || "").trim();
      if (v) next.set(name, v);
    }
    if (params.get("limit")) next.set("limit", params.get("limit"));
    const query = next.toString();
    location.hash = `#/instances${query ? `?${query}` : ""}`;
  });
  return form;
}

function pager(params, from, limit, shown, total) {
  const at = (offset) => {
    const next = new URLSearchParams(params);
    if (offset) next.set("from", String(offset));
    else next.delete("from");
    return `#/instances?${next}`;
  };
  const range = total ? `${from + 1}–${from + shown} of ${total}` : "none";
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    from > 0 ? h("a", { href: at(Math.max(0, from - limit)), rel: "prev" }, "← Previous") : "",
    h("span", { class: "range" }, range),
    from + shown < total ? h("a", { href: at(from + limit), rel: "next" }, "Next →") : "",
  );
}

async function instancesPage(query = "") {
  const params = new URLSearchParams(query);
  const from = Math.max(0, Number(params.get("from")) || 0);
  const limit = Math.min(100, Math.max(1, Number(params.get("limit")) || PAGE_SIZE));
  const [page, definitions] = await Promise.all([
    searchPage("process-instances", instanceFilter(params), { sort: [{ field: "startDate", order: "DESC" }], from, limit }),
    search("process-definitions", {}, { sort: [{ field: "processDefinitionId" }] }),
  ]);
  const processIds = [...new Set(definitions.map((d) => d.processDefinitionId))];
  return [
    h("h1", {}, "Process instances"),
    filterForm(params, processIds),
    batchBar(),
    instancesTable(page.items, { selectable: true }),
    pager(params, from, limit, page.items.length, page.total),
  ];
}

// -- batch operations on the selection --

const BATCHES = {
  cancel: ["/v2/process-instances/cancellation", "Cancel selected", "canceling"],
  retry: ["/v2/process-instances/incident-resolution", "Retry selected", "resolving the incidents of"],
};
const BATCH_DONE = new Set(["COMPLETED", "PARTIALLY_COMPLETED", "FAILED", "CANCELED"]);
const BATCH_POLL_MS = 500;
const BATCH_MAX_MS = 60000;

function batchBar() {
  const buttons = Object.entries(BATCHES).map(([kind, [, label]]) => {
    const button = h("button", { type: "button", class: `batch-${kind}${kind === "cancel" ? " danger" : ""}` }, label);
    button.addEventListener("click", () => startBatch(kind, button));
    return button;
  });
  const bar = h("div", { class: "batch-bar" }, buttons, h("span", { class: "selection meta" }), batchStatus());
  showSelection(bar);
  return bar;
}

/** The selection's size beside the batch buttons, which only act on a selection. */
function showSelection(bar = view.querySelector(".batch-bar")) {
  if (!bar) return;
  for (const button of bar.querySelectorAll("button")) button.disabled = !selected.size || Boolean(batch?.unavailable);
  bar.querySelector(".selection").textContent = selected.size
    ? `${selected.size} selected`
    : "Select instances to cancel or retry them together.";
}

function batchStatus() {
  const box = h("p", { id: "batch", role: "status", "aria-live": "polite" });
  if (!batch) return box;
  if (batch.unavailable) {
    box.className = "error";
    box.textContent = `Batch operations are unavailable on this gateway (${batch.unavailable}).`;
    return box;
  }
  const total = batch.operationsTotalCount ?? "?";
  const failed = batch.operationsFailedCount || 0;
  box.dataset.state = batch.state || "";
  box.append(
    `Batch ${batch.batchOperationKey} (${batch.what} ${batch.count} instance${batch.count === 1 ? "" : "s"}): `,
    stateTag(batch.state || "CREATED"),
    ` ${batch.operationsCompletedCount || 0} of ${total} done`,
    failed ? `, ${failed} failed` : "",
    ...(batch.errors || []).map((e) => h("span", { class: "error" }, ` ${e.message || e.type || ""}`)),
  );
  return box;
}

/** Starts a batch over the selected keys (a filter on them, as Operate does) and follows it until it ends. */
async function startBatch(kind, button) {
  const [path, , what] = BATCHES[kind];
  const keys = [...selected];
  button.disabled = true;
  view.dataset.busy = "true";
  let started = null;
  try {
    started = await post(path, { filter: { processInstanceKey: { $in: keys } } });
    batch = { batchOperationKey: started.batchOperationKey, state: "CREATED", what, count: keys.length };
    selected.clear();
    notify("");
    view.querySelector("#batch")?.replaceWith(batchStatus());
    const deadline = Date.now() + BATCH_MAX_MS;
    while (!BATCH_DONE.has(batch.state) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, BATCH_POLL_MS));
      try {
        Object.assign(batch, await get(`/v2/batch-operations/${batch.batchOperationKey}`));
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 404)) throw error; // not in the history yet
      }
      view.querySelector("#batch")?.replaceWith(batchStatus());
    }
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405) && !started) {
      batch = { unavailable: `POST ${path} answered ${error.status}` };
    } else {
      notify(error.message);
    }
  }
  await route();
  delete view.dataset.busy;
}

async function instancePage(key) {
  const instance = await get(`/v2/process-instances/${key}`);
  const [xml, elements, variables, incidents, tasks, flows, hierarchy, versions] = await Promise.all([
    processXml(instance.processDefinitionKey),
    search("element-instances", { processInstanceKey: key }, { sort: [{ field: "startDate" }] }),
    search("variables", { processInstanceKey: key }, { sort: [{ field: "name" }] }),
    search("incidents", { processInstanceKey: key }),
    search("user-tasks", { processInstanceKey: key }),
    // the history may not hold a new instance's flows yet: the page shows what it has
    get(`/v2/process-instances/${key}/sequence-flows`).catch(() => ({ items: [] })),
    get(`/v2/process-instances/${key}/call-hierarchy`).catch(() => []),
    search("process-definitions", { processDefinitionId: instance.processDefinitionId }, { sort: [{ field: "version" }] }),
  ]);
  const diagram = h("div", { id: "diagram" });
  const actions = [];
  if (instance.state === "ACTIVE") {
    const cancel = h("button", { class: "danger" }, "Cancel instance");
    const canceled = async () => (await get(`/v2/process-instances/${key}`)).state !== "ACTIVE";
    cancel.addEventListener("click", () => act(cancel, () => post(`/v2/process-instances/${key}/cancellation`), canceled));
    actions.push(cancel);
  }
  const open = incidents.filter((i) => i.state === "ACTIVE" || i.state === "PENDING");
  const taken = flows.items.map((f) => f.elementId); // sequenceFlowId is the history's id, elementId the BPMN one
  afterDrawing.push(() => showDiagram(diagram, xml, marksFrom(elements, incidents), { flows: taken }));
  return [
    callHierarchy(hierarchy),
    h(
      "h1",
      {},
      `${instance.processDefinitionName || instance.processDefinitionId} `,
      h("small", {}, `instance ${key}`),
      " ",
      stateTag(instance.state),
      ...actions,
    ),
    h(
      "p",
      { class: "meta" },
      `Started ${time(instance.startDate)}`,
      instance.endDate ? `, ended ${time(instance.endDate)}` : "",
      instance.businessId ? h("span", { class: "business-id" }, ` · business id ${instance.businessId}`) : "",
      " ",
      ...tagList(instance.tags),
    ),
    diagram,
    h(
      "p",
      { class: "legend" },
      h("span", { class: "key active" }, "active"),
      h("span", { class: "key completed" }, "completed"),
      h("span", { class: "key incident" }, "incident"),
      h("span", { class: "key taken" }, "sequence flow taken"),
    ),
    ...(instance.state === "ACTIVE" ? repairPanels(instance, xml, elements, versions) : []),
    h("h2", {}, `Incidents (${open.length} open)`),
    incidentsTable(incidents, false),
    h("h2", {}, "Variables"),
    table(
      [
        ["Name", (v) => v.name],
        ["Value", (v) => h("code", {}, v.value + (v.isTruncated ? " …" : ""))],
        ["Scope", (v) => (v.scopeKey === v.processInstanceKey ? "process" : v.scopeKey)],
      ],
      variables,
      "No variables.",
    ),
    h("h2", {}, "Elements"),
    table(
      [
        ["Element", (e) => e.elementName || e.elementId],
        ["Type", (e) => e.type],
        ["State", (e) => [stateTag(e.state), e.hasIncident ? h("span", { class: "state state-incident" }, "INCIDENT") : ""]],
        ["Started", (e) => time(e.startDate)],
        ["Ended", (e) => time(e.endDate)],
      ],
      elements,
    ),
    ...(tasks.length ? [h("h2", {}, "User tasks"), tasksTable(tasks)] : []),
  ];
}

/** The instances that called this one, from the root: each a link, this one last. */
function callHierarchy(chain) {
  if (!chain || chain.length < 2) return "";
  const items = chain.map((c, n) =>
    h(
      "li",
      {},
      n === chain.length - 1
        ? h("span", { "aria-current": "page" }, `${c.processDefinitionName} ${c.processInstanceKey}`)
        : link(`#/instance/${c.processInstanceKey}`, `${c.processDefinitionName} ${c.processInstanceKey}`),
    ),
  );
  return h("nav", { class: "breadcrumbs", "aria-label": "Call hierarchy" }, h("ol", {}, items));
}

const labelled = (label, control) => h("label", {}, label, control);
const option = (value, text, chosen = false) => h("option", { value, selected: chosen ? "" : null }, text);
const nodeName = (n) => (n.name ? `${n.name} (${n.id})` : n.id);

/** Moving a token and migrating, as an operator repairs a running instance; each folded until opened. */
function repairPanels(instance, xml, elements, versions) {
  const key = instance.processInstanceKey;
  const tokens = elements.filter((e) => e.state === "ACTIVE" && e.type !== "PROCESS");
  const source = h(
    "select",
    { name: "source" },
    tokens.map((e) => option(e.elementInstanceKey, `${e.elementName || e.elementId} (${e.elementInstanceKey})`)),
  );
  const target = h(
    "select",
    { name: "target" },
    flowNodes(xml, { movable: true }).map((n) => option(n.id, nodeName(n))),
  );
  const move = h("button", { type: "submit", class: "move" }, "Move token");
  const moveForm = h("form", { class: "repair-form", id: "move" }, labelled("Token at", source), labelled("Move to", target), move);
  moveForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const from = source.value;
    const instruction = {
      sourceElementInstruction: { sourceType: "byKey", sourceElementInstanceKey: from },
      targetElementId: target.value,
      ancestorScopeInstruction: { ancestorScopeType: "sourceParent" },
    };
    const moved = async () => (await get(`/v2/element-instances/${from}`)).state !== "ACTIVE";
    act(move, () => post(`/v2/process-instances/${key}/modification`, { moveInstructions: [instruction] }), moved);
  });

  const others = versions.filter((d) => d.processDefinitionKey !== instance.processDefinitionKey);
  const version = h(
    "select",
    { name: "targetVersion" },
    option("", "choose a version"),
    others.map((d) => option(d.processDefinitionKey, `version ${d.version} (${d.processDefinitionKey})`)),
  );
  const mapping = h("div", { class: "mapping" });
  const migrate = h("button", { type: "submit", class: "migrate", disabled: "" }, "Migrate");
  const migrateForm = h("form", { class: "repair-form", id: "migrate" }, labelled("Target version", version), mapping, migrate);
  version.addEventListener("change", async () => {
    mapping.replaceChildren();
    migrate.disabled = true;
    if (!version.value) return;
    try {
      const targets = flowNodes(await processXml(version.value));
      mapping.replaceChildren(mappingTable(flowNodes(xml), targets));
      migrate.disabled = false;
    } catch (error) {
      notify(error.message);
    }
  });
  migrateForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const targetKey = version.value;
    const mappingInstructions = [...mapping.querySelectorAll("select[data-source]")]
      .filter((s) => s.value)
      .map((s) => ({ sourceElementId: s.dataset.source, targetElementId: s.value }));
    const migrated = async () => (await get(`/v2/process-instances/${key}`)).processDefinitionKey === targetKey;
    act(migrate, () => post(`/v2/process-instances/${key}/migration`, { targetProcessDefinitionKey: targetKey, mappingInstructions }), migrated);
  });

  return [
    h("h2", {}, "Repair"),
    h(
      "details",
      { class: "repair" },
      h("summary", {}, "Move a token"),
      tokens.length ? moveForm : h("p", { class: "empty" }, "No active element instance to move."),
    ),
    h(
      "details",
      { class: "repair" },
      h("summary", {}, "Migrate to another version"),
      others.length ? migrateForm : h("p", { class: "empty" }, "This process has no other version to migrate to."),
    ),
  ];
}

/** Each source element with the target element of the same id preselected (or none: left unmapped). */
function mappingTable(sources, targets) {
  const ids = new Set(targets.map((t) => t.id));
  return table(
    [
      ["Source element", (s) => nodeName(s)],
      [
        "Target element",
        (s) =>
          h(
            "select",
            { "data-source": s.id, "aria-label": `Target element for ${s.id}` },
            option("", "not mapped"),
            targets.map((t) => option(t.id, nodeName(t), ids.has(s.id) && t.id === s.id)),
          ),
      ],
    ],
    sources,
  );
}

/** Retry as Operate does: a job without retries gets one back before the incident is resolved. */
async function resolveIncident(incident) {
  const jobNoRetries = incident.jobKey && /NO_RETRIES$/.test(incident.errorType || "");
  if (jobNoRetries) await patch(`/v2/jobs/${incident.jobKey}`, { changeset: { retries: 1 } });
  await post(`/v2/incidents/${incident.incidentKey}/resolution`);
}

function incidentsTable(incidents, withInstance = true) {
  const columns = [
    ["Error", (i) => h("span", { class: "error-type" }, i.errorType)],
    ["Message", (i) => i.errorMessage],
    ["Element", (i) => i.elementId],
    ["State", (i) => stateTag(i.state)],
    ["Created", (i) => time(i.creationTime)],
    [
      "",
      (i) => {
        if (i.state !== "ACTIVE") return "";
        const label = i.jobKey ? "Retry" : "Resolve";
        const button = h("button", { class: "resolve", "data-incident": i.incidentKey }, label);
        const resolved = async () => (await get(`/v2/incidents/${i.incidentKey}`)).state !== "ACTIVE";
        button.addEventListener("click", () => act(button, () => resolveIncident(i), resolved));
        return button;
      },
    ],
  ];
  if (withInstance) columns.unshift(["Instance", (i) => link(`#/instance/${i.processInstanceKey}`, i.processInstanceKey)]);
  return table(columns, incidents, "No incidents.");
}

async function incidentsPage() {
  const incidents = await search("incidents", { state: "ACTIVE" }, { sort: [{ field: "creationTime", order: "DESC" }] });
  return [h("h1", {}, "Open incidents"), incidentsTable(incidents)];
}

function tasksTable(tasks, empty = "No user tasks.") {
  const me = currentUser();
  return table(
    [
      ["Task", (t) => t.name || t.elementId],
      ["Process", (t) => t.processName || t.processDefinitionId],
      ["Instance", (t) => link(`#/instance/${t.processInstanceKey}`, t.processInstanceKey)],
      ["State", (t) => stateTag(t.state)],
      ["Assignee", (t) => t.assignee || "—"],
      ["Offered to", (t) => h("span", { class: "candidates" }, candidates(t))],
      ["Created", (t) => time(t.creationDate)],
      ["", (t) => (t.state === "CREATED" ? taskActions(t, me) : "")],
    ],
    tasks,
    empty,
  );
}

/** Whom a task is offered to: its candidate users and groups (none: anyone who may work on it). */
function candidates(task) {
  const named = [...(task.candidateUsers || []), ...(task.candidateGroups || []).map((g) => `${g} (group)`)];
  return named.length ? named.join(", ") : "anyone";
}

/**
 * Whether the signed-in user may claim this free task: it is offered to the user or one of the user's groups, or to
 * no one in particular. A gateway that checks no credentials lets anyone claim any task. The engine decides in the
 * end; this only spares the user buttons that would be refused.
 */
function mayClaim(task, me) {
  if (task.assignee || !me) return false;
  if (loadAuth().scheme === "none") return true;
  const users = task.candidateUsers || [];
  const groups = task.candidateGroups || [];
  if (!users.length && !groups.length) return true;
  const mine = currentGroups();
  return users.includes(me) || groups.some((g) => mine.includes(g));
}

/** Claim a task offered to the user; complete or give back one's own; a task someone else holds, or one offered to
 * others only, is theirs (as in Tasklist). */
function taskActions(task, me) {
  const key = task.userTaskKey;
  const assigneeIs = (who) => async () => ((await get(`/v2/user-tasks/${key}`)).assignee || null) === who;
  if (!task.assignee) {
    if (me && !mayClaim(task, me)) return "";
    const claim = h("button", { class: "claim", "data-task": key, title: me ? "" : "Sign in to claim tasks" }, "Claim");
    claim.disabled = !me;
    claim.addEventListener("click", () =>
      act(claim, () => post(`/v2/user-tasks/${key}/assignment`, { assignee: me, allowOverride: false }), assigneeIs(me)),
    );
    return claim;
  }
  if (task.assignee !== me) return "";
  const unclaim = h("button", { class: "unclaim", "data-task": key }, "Unclaim");
  unclaim.addEventListener("click", () => act(unclaim, () => call("DELETE", `/v2/user-tasks/${key}/assignee`), assigneeIs(null)));
  const variables = h("input", { class: "task-variables", "data-task": key, placeholder: '{"approved": true}', "aria-label": "variables (JSON)" });
  const complete = h("button", { class: "complete", "data-task": key }, "Complete");
  const completed = async () => (await get(`/v2/user-tasks/${key}`)).state !== "CREATED";
  complete.addEventListener("click", () =>
    act(complete, () => {
      const text = variables.value.trim();
      let parsed = {};
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new Error(`The variables are not JSON: ${text}`);
        }
      }
      return post(`/v2/user-tasks/${key}/completion`, { variables: parsed });
    }, completed),
  );
  return h("span", { class: "task-actions" }, variables, complete, unclaim);
}

/** The open tasks the gateway lets the user see: those assigned to the user, those the user may claim, and the
 * others it may see (assigned to someone else, or offered to others only). */
async function tasksPage() {
  const tasks = await search("user-tasks", { state: "CREATED" }, { sort: [{ field: "creationDate" }] });
  const me = currentUser();
  const mine = tasks.filter((t) => me && t.assignee === me);
  const claimable = tasks.filter((t) => mayClaim(t, me));
  const others = tasks.filter((t) => !mine.includes(t) && !claimable.includes(t));
  return [
    h("h1", {}, "Open user tasks"),
    h("p", { class: "meta" }, me ? `Claiming as ${me}.` : "Sign in to claim tasks."),
    h("h2", { id: "tasks-mine" }, `Assigned to you (${mine.length})`),
    tasksTable(mine, "No task is assigned to you."),
    h("h2", { id: "tasks-claimable" }, `You may claim (${claimable.length})`),
    tasksTable(claimable, "No task is offered to you."),
    ...(others.length ? [h("h2", { id: "tasks-others" }, `Others' tasks (${others.length})`), tasksTable(others)] : []),
  ];
}

// -- routing and credentials --

const routes = [
  [/^#\/processes$/, processesPage, "processes"],
  [/^#\/process\/(\d+)$/, processPage, "processes"],
  [/^#\/instances(?:\?(.*))?$/, instancesPage, "instances"],
  [/^#\/instance\/(\d+)$/, instancePage, "instances"],
  [/^#\/incidents$/, incidentsPage, "incidents"],
  [/^#\/tasks$/, tasksPage, "tasks"],
];

const REFRESH_MS = 5000;
let afterDrawing = []; // what a page draws once it is on screen (its diagram)
let drawn = { hash: null, html: null };

/** Draws the page the URL names; `refresh` leaves the page as it is when nothing on it changed. */
async function route({ refresh = false } = {}) {
  const hash = location.hash || "#/instances";
  const [pattern, page, nav] = routes.find(([p]) => p.test(hash)) || routes[2];
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.dataset.nav === nav);
  afterDrawing = [];
  let content;
  try {
    content = await page(...(hash.match(pattern) || []).slice(1));
  } catch (error) {
    const unauthorized = error instanceof ApiError && (error.status === 401 || error.status === 403);
    if (unauthorized) document.getElementById("auth").hidden = false;
    content = [
      h("h1", {}, unauthorized ? "Sign in" : "Cannot load this page"),
      h("p", { class: "error" }, unauthorized ? `The gateway refused the credentials: ${error.message}` : error.message),
    ];
  }
  if ((location.hash || "#/instances") !== hash) return; // the user went elsewhere meanwhile
  const html = content.map((node) => node.outerHTML).join("");
  if (refresh && hash === drawn.hash && html === drawn.html) return;
  view.replaceChildren(...content);
  drawn = { hash, html };
  for (const draw of afterDrawing) draw();
  // what is on screen, for people reading the DOM and for the browser test waiting on a redraw
  view.dataset.shown = hash;
  view.dataset.renders = String(Number(view.dataset.renders || 0) + 1);
}

/** Live state: the page is fetched again every few seconds, unless the user is busy on it. */
function refreshNow() {
  const typing = document.activeElement?.matches("input, select, textarea");
  const pending = [...document.querySelectorAll(".task-variables")].some((input) => input.value);
  const signingIn = !document.getElementById("auth").hidden;
  const repairing = view.querySelector("details.repair[open]");
  if (document.hidden || view.dataset.busy || typing || pending || signingIn || repairing) return;
  route({ refresh: true });
}

/**
 * The sign-in form: credentials are checked with GET /v2/authentication/me before the page uses them, and the
 * gateway's answer names who is signed in and the groups the user is in. Refused credentials sign the user out.
 */
function setUpAuthForm() {
  const form = document.getElementById("auth");
  const toggle = document.getElementById("auth-toggle");
  const signOut = document.getElementById("sign-out");
  const error = document.getElementById("auth-error");
  const auth = loadAuth();
  for (const name of ["scheme", "user", "password", "token", "me"]) form.elements[name].value = auth[name] || (name === "scheme" ? "none" : "");
  const showFields = () => {
    for (const label of form.querySelectorAll("[data-for]")) {
      label.hidden = !label.dataset.for.split(" ").includes(form.elements.scheme.value);
    }
  };
  const showWho = () => {
    const who = currentUser();
    const signedIn = Boolean(who) && loadAuth().scheme !== "none";
    toggle.textContent = signedIn ? `Signed in as ${who}` : who ? `Working as ${who}` : "Sign in";
    signOut.hidden = !signedIn;
  };
  form.elements.scheme.addEventListener("change", showFields);
  toggle.addEventListener("click", () => (form.hidden = !form.hidden));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const entered = Object.fromEntries(new FormData(form));
    try {
      const me = await whoIs(entered);
      const anonymous = entered.scheme === "none";
      saveAuth({ ...entered, who: anonymous ? entered.me || "" : me.username, groups: anonymous ? [] : me.groups || [] });
      error.hidden = true;
      form.hidden = true;
    } catch (refused) {
      saveAuth({ scheme: entered.scheme }); // signed out: the page asks for credentials again
      const rejected = refused instanceof ApiError && refused.status === 401;
      error.textContent = rejected ? `The gateway refused these credentials: ${refused.message}` : `Cannot sign in: ${refused.message}`;
      error.hidden = false;
    }
    showWho();
    route();
  });
  signOut.addEventListener("click", () => {
    saveAuth({ scheme: loadAuth().scheme });
    for (const name of ["user", "password", "token"]) form.elements[name].value = "";
    error.hidden = true;
    showWho();
    route();
  });
  showFields();
  showWho();
  // a gateway that checks credentials: offer a user and password first
  if (!currentUser() && auth.scheme === "none") {
    whoIs({ scheme: "none" }).catch((refused) => {
      const untouched = form.elements.scheme.value === "none" && loadAuth().scheme === "none" && !currentUser();
      if (refused instanceof ApiError && refused.status === 401 && untouched) {
        form.elements.scheme.value = "basic";
        showFields();
      }
    });
  }
}

setUpAuthForm();
window.addEventListener("hashchange", () => route());
route();
setInterval(refreshNow, REFRESH_MS);
