// Weir's web view: what is deployed, what runs, where it waits, what failed, and the tasks people work on.
// Pages are chosen by the URL fragment (#/instances, #/instance/KEY, …); every figure comes from the REST API v2.

import { ApiError, call, currentUser, get, loadAuth, patch, post, processXml, saveAuth, search } from "./api.js";
import { marksFrom, showDiagram } from "./diagram.js";

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
  const [definition, xml, instances, waiting, incidents] = await Promise.all([
    get(`/v2/process-definitions/${key}`),
    processXml(key),
    search("process-instances", { processDefinitionKey: key }, { sort: [{ field: "startDate", order: "DESC" }] }),
    search("element-instances", { processDefinitionKey: key, state: "ACTIVE" }),
    search("incidents", { processDefinitionKey: key, state: "ACTIVE" }),
  ]);
  const running = instances.filter((i) => i.state === "ACTIVE");
  const diagram = h("div", { id: "diagram" });
  const page = [
    h("h1", {}, `${definition.name || definition.processDefinitionId} (version ${definition.version})`),
    h("p", { class: "meta" }, "Where the running instances are: the number on an element counts those waiting there."),
    diagram,
    h("h2", {}, `Instances (${running.length} running of ${instances.length})`),
    instancesTable(instances),
  ];
  afterDrawing.push(() => showDiagram(diagram, xml, marksFrom(waiting, incidents)));
  return page;
}

function instancesTable(instances) {
  return table(
    [
      ["Instance", (i) => link(`#/instance/${i.processInstanceKey}`, i.processInstanceKey)],
      ["Process", (i) => `${i.processDefinitionName || i.processDefinitionId} v${i.processDefinitionVersion}`],
      ["Business id", (i) => i.businessId || ""],
      ["Tags", (i) => tagList(i.tags)],
      ["State", (i) => [stateTag(i.state), i.hasIncident ? h("span", { class: "state state-incident" }, "INCIDENT") : ""]],
      ["Started", (i) => time(i.startDate)],
      ["Ended", (i) => time(i.endDate)],
    ],
    instances,
    "No process instance yet: start one with `weir create PROCESS_ID`.",
  );
}

/** An instance's tags, each as a small label. */
function tagList(tags) {
  return (tags || []).map((t) => h("span", { class: "tag" }, t));
}

async function instancesPage() {
  const instances = await search("process-instances", {}, { sort: [{ field: "startDate", order: "DESC" }] });
  return [h("h1", {}, "Process instances"), instancesTable(instances)];
}

async function instancePage(key) {
  const instance = await get(`/v2/process-instances/${key}`);
  const [xml, elements, variables, incidents, tasks] = await Promise.all([
    processXml(instance.processDefinitionKey),
    search("element-instances", { processInstanceKey: key }, { sort: [{ field: "startDate" }] }),
    search("variables", { processInstanceKey: key }, { sort: [{ field: "name" }] }),
    search("incidents", { processInstanceKey: key }),
    search("user-tasks", { processInstanceKey: key }),
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
  afterDrawing.push(() => showDiagram(diagram, xml, marksFrom(elements, incidents)));
  return [
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
    h("p", { class: "legend" }, h("span", { class: "key active" }, "active"), h("span", { class: "key completed" }, "completed"), h("span", { class: "key incident" }, "incident")),
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

function tasksTable(tasks) {
  const me = currentUser();
  return table(
    [
      ["Task", (t) => t.name || t.elementId],
      ["Process", (t) => t.processName || t.processDefinitionId],
      ["Instance", (t) => link(`#/instance/${t.processInstanceKey}`, t.processInstanceKey)],
      ["State", (t) => stateTag(t.state)],
      ["Assignee", (t) => t.assignee || "—"],
      ["Created", (t) => time(t.creationDate)],
      ["", (t) => (t.state === "CREATED" ? taskActions(t, me) : "")],
    ],
    tasks,
    "No user tasks.",
  );
}

/** Claim a free task; complete or give back one's own; a task someone else holds is theirs (as in Tasklist). */
function taskActions(task, me) {
  const key = task.userTaskKey;
  const assigneeIs = (who) => async () => ((await get(`/v2/user-tasks/${key}`)).assignee || null) === who;
  if (!task.assignee) {
    const claim = h("button", { class: "claim", "data-task": key, title: me ? "" : "Enter your name under Sign in" }, "Claim");
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

async function tasksPage() {
  const tasks = await search("user-tasks", { state: "CREATED" }, { sort: [{ field: "creationDate" }] });
  const me = currentUser();
  return [
    h("h1", {}, "Open user tasks"),
    h("p", { class: "meta" }, me ? `Claiming as ${me}.` : "Enter your name under Sign in to claim tasks."),
    tasksTable(tasks),
  ];
}

// -- routing and credentials --

const routes = [
  [/^#\/processes$/, processesPage, "processes"],
  [/^#\/process\/(\d+)$/, processPage, "processes"],
  [/^#\/instances$/, instancesPage, "instances"],
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
  if (document.hidden || view.dataset.busy || typing || pending || signingIn) return;
  route({ refresh: true });
}

function setUpAuthForm() {
  const form = document.getElementById("auth");
  const toggle = document.getElementById("auth-toggle");
  const auth = loadAuth();
  for (const name of ["scheme", "user", "password", "token", "me"]) form.elements[name].value = auth[name] || (name === "scheme" ? "none" : "");
  const showFields = () => {
    for (const label of form.querySelectorAll("[data-for]")) {
      label.hidden = !label.dataset.for.split(" ").includes(form.elements.scheme.value);
    }
  };
  const showWho = () => {
    const who = currentUser();
    toggle.textContent = who ? `Signed in as ${who}` : "Sign in";
  };
  form.elements.scheme.addEventListener("change", showFields);
  toggle.addEventListener("click", () => (form.hidden = !form.hidden));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const entered = Object.fromEntries(new FormData(form));
    saveAuth(entered);
    form.hidden = true;
    showWho();
    route();
  });
  showFields();
  showWho();
}

setUpAuthForm();
window.addEventListener("hashchange", () => route());
route();
setInterval(refreshNow, REFRESH_MS);
