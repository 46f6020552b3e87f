// The REST API v2 of the gateway serving this page, with the credentials the user signed in with (kept for the
// session). What the page shows is what the API answers for them: the gateway keeps each caller to what it may see.

const STORAGE_KEY = "weir.auth";

export function loadAuth() {
  try {
    return { scheme: "none", ...JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "{}") };
  } catch {
    return { scheme: "none" };
  }
}

export function saveAuth(auth) {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(auth));
}

/** Who is signed in: the user the gateway named at sign-in (GET /v2/authentication/me), else, on a gateway that
 * checks no credentials, the name the user gave for claiming tasks. */
export function currentUser() {
  const auth = loadAuth();
  return auth.who || (auth.scheme === "none" ? auth.me : "") || "";
}

/** The groups the signed-in user is in (tasks offered to one of them are the user's to claim). */
export function currentGroups() {
  return loadAuth().groups || [];
}

function authorization(auth) {
  if (auth.scheme === "basic" && auth.user) return "Basic " + btoa(`${auth.user}:${auth.password || ""}`);
  if (auth.scheme === "bearer" && auth.token) return "Bearer " + auth.token;
  return null;
}

/** An error the API answered, with its problem detail (RFC 9457) when there is one. */
export class ApiError extends Error {
  constructor(status, problem, path) {
    super(problem?.detail || problem?.title || `${path} answered ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export async function call(method, path, body, { accept = "application/json", auth = loadAuth() } = {}) {
  // marked as a script's call: the gateway then answers a missing credential without a challenge, so the browser
  // leaves asking for it to the page's sign-in form
  const headers = { accept, "x-requested-with": "XMLHttpRequest" };
  const credentials = authorization(auth);
  if (credentials) headers.authorization = credentials;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) {
    let problem = null;
    try {
      problem = JSON.parse(text);
    } catch {
      problem = { detail: text || response.statusText };
    }
    throw new ApiError(response.status, problem, path);
  }
  if (accept !== "application/json") return text;
  return text ? JSON.parse(text) : null;
}

/**
 * Who the gateway says `auth`'s credentials belong to (Camunda's CamundaUserResult: username, displayName, groups,
 * tenants…); throws the ApiError of credentials it refuses (401). A gateway that checks none answers "anonymous".
 */
export const whoIs = (auth) => call("GET", "/v2/authentication/me", undefined, { auth });

/** Every item of a search (cursor paging), up to `max`. */
export async function search(entity, filter = {}, { sort, max = 1000 } = {}) {
  const items = [];
  let after;
  while (items.length < max) {
    const page = { limit: Math.min(100, max - items.length), ...(after ? { after } : {}) };
    const result = await call("POST", `/v2/${entity}/search`, { filter, page, ...(sort ? { sort } : {}) });
    items.push(...(result.items || []));
    after = result.page?.endCursor;
    if (!after || !result.items?.length || items.length >= (result.page?.totalItems ?? Infinity)) break;
  }
  return items;
}

/** One page of a search (offset paging, as Operate's lists page): its items and the total the filter matches. */
export async function searchPage(entity, filter = {}, { sort, from = 0, limit = 20 } = {}) {
  const result = await call("POST", `/v2/${entity}/search`, { filter, page: { from, limit }, ...(sort ? { sort } : {}) });
  return { items: result.items || [], total: result.page?.totalItems ?? 0 };
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const patch = (path, body) => call("PATCH", path, body);
export const processXml = (definitionKey) =>
  call("GET", `/v2/process-definitions/${definitionKey}/xml`, undefined, { accept: "text/xml" });
