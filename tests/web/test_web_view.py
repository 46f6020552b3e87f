"""The web view in headless Chromium against a real ``weir start``: diagrams with live state, incident retry, task list,
and an operator's repairs: the instance list's filters and pages, moving a token, migrating, batch operations.

The browser is Debian's ``chromium`` driven by playwright-core (both installed by ``make browser``, part of
``make test``); ``drive.mjs`` performs the clicks and reports what the page showed, and every effect is checked
through the REST API afterwards. Screenshots are kept in tests/web/artifacts/.
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import shutil
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from client.inspect_cli import RestClient
from tests.harness import REPO, WeirProcess, eventually
from tests.integration.clients import Stub, activate_now, complete, create, deploy, unique_copy
from tests.integration.clients import pb as gateway_pb
from tests.security import TokenIssuer, _key, make_certificates

DRIVER = Path(__file__).with_name("drive.mjs")
ARTIFACTS = Path(__file__).with_name("artifacts")
BROWSER_MODULES = REPO / ".cache" / "browser" / "node_modules"
CHROMIUM = "/usr/bin/chromium"

# the history store trails the engine (a loaded machine exports slowly): searches wait this long for it
HISTORY_WAIT = 30.0


class WebWeir:
    """A ``weir start`` with its REST API (and so the web view) on a port of its own."""

    def __init__(self, tmp: Path) -> None:
        self.process = WeirProcess(tmp / "data")
        self.base = self.process.rest_url + "/"
        self.rest = RestClient(self.process.rest_url, "", timeout=10)

    def one(self, entity: str, filter_: dict[str, Any]) -> dict[str, Any]:
        (item,) = self.rest.search(entity, filter_)
        return item


def need_browser() -> None:
    if not (shutil.which("node") and Path(CHROMIUM).exists() and (BROWSER_MODULES / "playwright-core").is_dir()):
        pytest.fail("the browser test needs node, /usr/bin/chromium and playwright-core: run `make browser`")


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWeir]:
    need_browser()
    w = WebWeir(tmp_path_factory.mktemp("web"))
    w.process.start()
    try:
        yield w
    finally:
        w.process.stop()


@pytest.fixture(scope="module")
def stub(web: WebWeir) -> Iterator[Stub]:
    channel = grpc.insecure_channel(web.process.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()


class Browser:
    """One ``drive.mjs`` (one Chromium) for the module's scenarios, each in a fresh browser context of its own: a
    Chromium launch per scenario cost seconds each on a loaded machine. Started on the first scenario, and again
    after one that did not answer in time."""

    SCENARIO_TIMEOUT = 120.0

    def __init__(self, log: Path) -> None:
        self.log = log  # what the driver writes to stderr
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        self.lines = queue.Queue()
        command = ["node", str(DRIVER), str(BROWSER_MODULES), CHROMIUM]
        with self.log.open("a") as log:
            proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
            )
        lines = self.lines

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.proc = proc
        return proc

    def _errors(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def run(self, scenario: dict[str, Any]) -> dict[str, Any]:
        """The driver's report on ``scenario``."""
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(scenario) + "\n")
            proc.stdin.flush()
            line = self.lines.get(timeout=self.SCENARIO_TIMEOUT)
        except (BrokenPipeError, queue.Empty) as e:
            self.close(kill=True)
            pytest.fail(f"the browser driver did not answer ({e!r}): {self._errors()}")
        if line is None:
            self.close()
            pytest.fail(f"the browser driver failed ({proc.wait()}): {self._errors()}")
        try:
            report: dict[str, Any] = json.loads(line)
        except ValueError:
            pytest.fail(f"the browser driver answered {line[:3000]!r}: {self._errors()}")
        return report

    def close(self, kill: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:  # mid-scenario: its answer would come too late, to the next one
            proc.kill()
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()  # the driver closes Chromium and exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    need_browser()
    b = Browser(tmp_path_factory.mktemp("browser") / "drive.log")
    try:
        yield b
    finally:
        b.close()


def drive(browser: Browser, web: WebWeir, steps: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Runs the steps in a fresh browser context; returns what each step saw (fails with the browser's console)."""
    ARTIFACTS.mkdir(exist_ok=True)
    scenario = {"base": web.base, "artifacts": str(ARTIFACTS), "steps": steps}
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(scenario))  # again by hand: node drive.mjs MODULES < FILE
    report = browser.run(scenario)
    assert "error" not in report, f"{report['error']}\nbrowser console: {report['console']}"
    blocked = [line for line in report["console"] if "Content Security Policy" in line]
    assert not blocked, f"the web view's content security policy blocked part of the page: {blocked}"
    print(f"screenshots in {ARTIFACTS}")
    return list(report["steps"])


def assert_no_error(notice: str) -> None:
    """The page reported no failure (at most that the history had not caught up yet when it redrew)."""
    assert notice == "" or notice.startswith("Done; the history has not caught up yet"), notice


def test_instance_page_highlights_the_active_element_and_retries_an_incident(
    web: WebWeir, stub: Stub, browser: Browser
) -> None:
    order = deploy(stub, "web-order.bpmn")
    check_stock = order.type("check-stock")
    failing = create(stub, order.pid(), {"orderId": 1})
    (job,) = activate_now(stub, check_stock, 1)
    stub.FailJob(gateway_pb.FailJobRequest(jobKey=job.key, retries=0, errorMessage="stock service unreachable"))
    waiting = create(stub, order.pid(), {"orderId": 2})
    incident = eventually(
        lambda: web.rest.search("incidents", {"processInstanceKey": str(failing), "state": "ACTIVE"}),
        timeout=HISTORY_WAIT,
        what="the incident in the history",
    )[0]
    eventually(
        lambda: web.rest.search("element-instances", {"processInstanceKey": str(waiting), "elementId": "check-stock"}),
        timeout=HISTORY_WAIT,
        what="the waiting instance in the history",
    )

    seen = drive(
        browser,
        web,
        [
            {"open": "#/processes"},
            {"texts": "#view td a"},
            {"open": f"#/process/{order.definition_key}"},
            {"diagram": True},
            {"badges": True},
            {"screenshot": "process"},
            {"open": f"#/instance/{waiting}"},
            {"diagram": True},
            {"screenshot": "instance-waiting"},
            {"open": f"#/instance/{failing}"},
            {"diagram": True},
            {"screenshot": "instance-incident"},
            {"click": f"button.resolve[data-incident='{incident['incidentKey']}']"},
            {"gone": "button.resolve"},  # the page no longer offers a retry
            {"screenshot": "incident-resolved"},
        ],
        "incident",
    )
    assert "Order" in seen[1]["texts"]
    # the process's diagram: one of its instances waits at 'Check stock', the other has an incident there
    assert seen[3]["markers"] == {"check-stock": ["weir-incident"]}
    # the statistics endpoint's counts: one waiting, one with an incident, both past the start event
    assert seen[4]["badges"] == {"check-stock": {"active": "1", "incidents": "1"}, "received": {"completed": "2"}}
    assert seen[6]["heading"].startswith("Order") and str(waiting) in seen[6]["heading"]
    assert seen[7]["markers"]["check-stock"] == ["weir-active"]
    assert seen[7]["markers"]["received"] == ["weir-completed"]
    assert "ship" not in seen[7]["markers"]
    assert seen[10]["markers"]["check-stock"] == ["weir-incident"]
    assert_no_error(seen[12]["notice"])

    # the page gave the job a retry and resolved the incident: the job is back, and its completion moves the instance on
    assert web.rest.call("GET", f"/v2/incidents/{incident['incidentKey']}")["state"] == "RESOLVED"
    (again,) = activate_now(stub, check_stock, 1)
    assert again.key == job.key and again.processInstanceKey == failing
    complete(stub, again.key)
    ship = eventually(
        lambda: web.rest.search("element-instances", {"processInstanceKey": str(failing), "elementId": "ship"}),
        timeout=HISTORY_WAIT,
        what="the instance to reach 'Ship order'",
    )
    assert ship[0]["state"] == "ACTIVE"


def test_instance_page_follows_the_instance_live(web: WebWeir, stub: Stub, browser: Browser) -> None:
    order = deploy(stub, "web-order.bpmn")
    key = create(stub, order.pid(), {"orderId": 3})
    (job,) = activate_now(stub, order.type("check-stock"), 1)
    eventually(
        lambda: web.rest.search("element-instances", {"processInstanceKey": str(key), "elementId": "check-stock"}),
        timeout=HISTORY_WAIT,
        what="the instance in the history",
    )
    seen = drive(
        browser,
        web,
        [
            {"open": f"#/instance/{key}"},
            {"diagram": True},
            {"api": {"method": "POST", "path": f"/v2/jobs/{job.key}/completion", "body": {}}},
            # the page fetches the instance again by itself: no reload, no click
            {"waitFor": "#diagram[data-ready=true] .djs-element[data-element-id='ship'].weir-active"},
            {"diagram": True},
            {"screenshot": "instance-moved-on"},
        ],
        "live",
    )
    assert seen[1]["markers"]["check-stock"] == ["weir-active"]
    assert seen[2]["status"] == 204
    assert seen[4]["markers"]["check-stock"] == ["weir-completed"]
    assert seen[4]["markers"]["ship"] == ["weir-active"]


def test_task_list_claims_and_completes_a_user_task(web: WebWeir, stub: Stub, browser: Browser) -> None:
    approval = deploy(stub, "web-approval.bpmn")
    instance = create(stub, approval.pid(), {"amount": 120})
    task = eventually(
        lambda: web.rest.search("user-tasks", {"processInstanceKey": str(instance), "state": "CREATED"}),
        timeout=HISTORY_WAIT,
        what="the user task in the history",
    )[0]
    key = task["userTaskKey"]

    seen = drive(
        browser,
        web,
        [
            {"open": "#/tasks"},
            {"auth": {"scheme": "none", "me": "ada"}},
            {"click": f"button.claim[data-task='{key}']"},
            {"click": f"button.unclaim[data-task='{key}']"},
            {"waitFor": f"button.claim[data-task='{key}']"},
            {"texts": f"button.claim[data-task='{key}']"},
            {"click": f"button.claim[data-task='{key}']"},
            {"waitFor": f"button.complete[data-task='{key}']"},
            {"texts": "#view td"},
            {"screenshot": "task-claimed"},
            {"fill": f"input.task-variables[data-task='{key}']", "text": '{"approved": true}'},
            {"click": f"button.complete[data-task='{key}']"},
        ],
        "tasks",
    )
    assert seen[5]["texts"] == ["Claim"]  # given back, the task can be claimed again
    assert "ada" in seen[8]["texts"]
    assert_no_error(seen[11]["notice"])

    def completed() -> bool:
        state = web.rest.call("GET", f"/v2/process-instances/{instance}")["state"]
        return state == "COMPLETED"

    eventually(completed, timeout=HISTORY_WAIT, what="the instance to complete after its task")
    approved = web.one("variables", {"processInstanceKey": str(instance), "name": "approved"})
    assert approved["value"] == "true"
    assert web.rest.call("GET", f"/v2/user-tasks/{key}")["assignee"] == "ada"


def test_without_the_diagram_viewer_the_page_says_how_to_install_it(web: WebWeir, stub: Stub, browser: Browser) -> None:
    order = deploy(stub, "web-order.bpmn")
    eventually(
        lambda: web.rest.search("process-definitions", {"processDefinitionId": order.pid()}),
        timeout=HISTORY_WAIT,
        what="the process",
    )
    key = order.definition_key
    seen = drive(
        browser,
        web,
        [{"block": "**/vendor/bpmn-viewer.js"}, {"open": f"#/process/{key}"}, {"texts": "#diagram .missing"}],
        "no-viewer",
    )
    assert seen[1]["heading"] == "Order (version 1)"
    (message,) = seen[2]["texts"]
    assert "make web" in message and "gateway/web/dist/vendor/" in message


def test_the_gateway_serves_the_pages_beside_the_api(web: WebWeir) -> None:
    def get(path: str) -> tuple[int, str, bytes]:
        request = urllib.request.Request(web.process.rest_url + path)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers.get_content_type(), response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get_content_type(), e.read()

    status, kind, body = get("/")
    assert (status, kind) == (200, "text/html") and b'<script type="module" src="app.js">' in body
    assert get("/app.js")[:2] == (200, "application/javascript")
    assert get("/nope.js")[0] == 404
    # an unknown API path is still a problem detail, not a missing page
    assert get("/v2/no-such-thing")[:2] == (404, "application/problem+json")
    with socket.create_connection(("127.0.0.1", int(web.process.rest_url.rsplit(":", 1)[1])), timeout=10) as s:
        s.sendall(b"GET /../../rest/server.py HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 404"), answer[:100]


def test_sign_in_when_the_gateway_checks_credentials(tmp_path: Path, browser: Browser) -> None:
    """With basic auth on, the page asks for credentials; once given, it sends them with every call."""
    from gateway.auth import hash_password

    users = tmp_path / "users"
    users.write_text(f"ada:{hash_password('lovelace')}\n")
    w = WebWeir(tmp_path)
    w.process.env = {
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_USERS_FILE": str(users),
    }
    w.process.start()
    try:
        seen = drive(
            browser,
            w,
            [
                {"open": "#/instances"},
                {"auth": {"scheme": "basic", "user": "ada", "password": "wrong"}},
                {"texts": "#view h1, #view p.error"},
                {"auth": {"scheme": "basic", "user": "ada", "password": "lovelace"}},
                {"open": "#/tasks"},
                {"texts": "#view p.meta, #auth-toggle"},
            ],
            "sign-in",
        )
        challenges = [challenge(w, scripted) for scripted in (False, True)]
        # the inspection commands send the client commands' credentials to the REST API too
        signed_in = weir_cli(w, "incidents", "--username", "ada", "--password", "lovelace")
        anonymous = weir_cli(w, "incidents")
    finally:
        w.process.stop()
    # a plain client is told how to authenticate; the page's own calls are not, so no browser dialog pops up
    assert challenges == ['Basic realm="weir"', None]
    assert (signed_in.returncode, signed_in.stdout) == (0, "No open incidents.\n"), signed_in.stderr
    assert anonymous.returncode == 1 and "answered 401" in anonymous.stderr and "credentials" in anonymous.stderr
    assert seen[0]["heading"] == "Sign in"
    assert seen[2]["texts"][0] == "Sign in"
    assert seen[4]["heading"] == "Open user tasks"
    assert sorted(seen[5]["texts"]) == ["Claiming as ada.", "Signed in as ada"]


def challenge(w: WebWeir, scripted: bool) -> str | None:
    """The WWW-Authenticate header of a search without credentials."""
    request = urllib.request.Request(w.process.rest_url + "/v2/process-instances/search", data=b"{}", method="POST")
    request.add_header("content-type", "application/json")
    if scripted:
        request.add_header("x-requested-with", "XMLHttpRequest")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    return refused.value.headers.get("WWW-Authenticate")


def weir_cli(w: WebWeir, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "client.cli", *args, "--rest-address", w.process.rest_url]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_sign_in_with_a_bearer_token_when_the_gateway_checks_jwts(tmp_path: Path, browser: Browser) -> None:
    """With OAuth on, the page signs in with an access token: a forged one is refused, a valid one lists instances."""
    audience = "weir-gateway"
    with TokenIssuer(make_certificates(tmp_path / "certs"), {}) as issuer:
        w = WebWeir(tmp_path)
        w.process.env = {
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth",
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_PATH": str(issuer.write_jwks(tmp_path / "jwks.json")),
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_ISSUER": issuer.issuer,
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE": audience,
        }
        w.process.start()
        try:
            token = issuer.token("ada", audience=audience)
            bearer = [("authorization", f"Bearer {token}")]
            w.rest = RestClient(w.process.rest_url, f"Bearer {token}", timeout=10)
            with grpc.insecure_channel(w.process.address) as channel:
                stub = Stub(channel)
                content = (REPO / "tests" / "fixtures" / "bpmn" / "web-order.bpmn").read_bytes()
                stub.DeployResource(
                    gateway_pb.DeployResourceRequest(resources=[gateway_pb.Resource(name="o.bpmn", content=content)]),
                    metadata=bearer,
                    timeout=10,
                )
                request = gateway_pb.CreateProcessInstanceRequest(bpmnProcessId="web-order", version=-1)
                key = stub.CreateProcessInstance(request, metadata=bearer, timeout=10).processInstanceKey
            eventually(
                lambda: w.rest.search("process-instances", {"processInstanceKey": str(key)}),
                timeout=HISTORY_WAIT,
                what="the instance in the history",
            )
            forged = issuer.token("ada", audience=audience, key=_key())
            seen = drive(
                browser,
                w,
                [
                    {"open": "#/instances"},
                    {"auth": {"scheme": "bearer", "token": forged}},
                    {"texts": "#view h1"},
                    {"auth": {"scheme": "bearer", "token": token}},
                    {"waitFor": f"#view td a[href='#/instance/{key}']"},
                    {"texts": "#view h1, #view td a, #auth-toggle"},
                    {"screenshot": "bearer-signed-in"},
                ],
                "bearer-sign-in",
            )
            anonymous = challenge(w, scripted=True)
        finally:
            w.process.stop()
    assert seen[0]["heading"] == "Sign in"
    assert seen[2]["texts"] == ["Sign in"], "a forged token does not sign in"
    assert {"Process instances", str(key), "Signed in as ada"} <= set(seen[5]["texts"])
    assert anonymous is None


def test_a_signed_in_user_sees_and_takes_the_tasks_offered_to_it(tmp_path: Path, browser: Browser) -> None:
    """With the cluster's users and authorizations on: ann signs in (a wrong password is refused), sees only the
    tasks offered to her or to her group (none of bob's: she holds no READ_USER_TASK) and claims one; signed out,
    the page asks again; bob sees his own."""
    admin_password = "admin-secret"
    w = WebWeir(tmp_path)
    w.process.env = {
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "0.2",
        "WEIR_BROKER_SECURITY_AUTHORIZATIONS_ENABLED": "true",
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_USERNAME": "admin",
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD": admin_password,
        "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_USERS": "admin",
    }
    w.process.start()
    try:
        admin = "Basic " + base64.b64encode(f"admin:{admin_password}".encode()).decode()
        w.rest = RestClient(w.process.rest_url, admin, timeout=10)
        for user in ("ann", "bob"):
            w.rest.call("POST", "/v2/users", {"username": user, "password": f"{user}-secret"})
        w.rest.call("POST", "/v2/groups", {"groupId": "clerks", "name": "Clerks"})
        w.rest.call("PUT", "/v2/groups/clerks/users/ann")
        with grpc.insecure_channel(w.process.address) as channel:
            content = (REPO / "tests" / "fixtures" / "bpmn" / "web-offers.bpmn").read_bytes()
            Stub(channel).DeployResource(
                gateway_pb.DeployResourceRequest(resources=[gateway_pb.Resource(name="o.bpmn", content=content)]),
                metadata=[("authorization", admin)],
                timeout=10,
            )
        offers = {"ann": {"users": ["ann"], "groups": []}, "clerks": {"users": [], "groups": ["clerks"]},
                  "bob": {"users": ["bob"], "groups": []}}  # fmt: skip
        instances = {
            name: w.rest.call("POST", "/v2/process-instances", {"processDefinitionId": "web-offers",
                                                                "variables": variables})["processInstanceKey"]
            for name, variables in offers.items()
        }  # fmt: skip
        tasks = eventually(
            lambda: (found := w.rest.search("user-tasks", {"processDefinitionId": "web-offers"})) and len(found) == 3
            and {t["processInstanceKey"]: t["userTaskKey"] for t in found},
            timeout=HISTORY_WAIT,
            what="the three tasks in the history",
        )  # fmt: skip
        key = {name: tasks[instance] for name, instance in instances.items()}
        rows = "#view h2, #view td:first-child + td + td a"
        seen = drive(
            browser,
            w,
            [
                {"open": "#/tasks"},
                {"auth": {"scheme": "basic", "user": "ann", "password": "wrong"}},
                {"texts": "#auth-error, #view h1"},
                {"auth": {"scheme": "basic", "user": "ann", "password": "ann-secret"}},
                {"waitFor": f"button.claim[data-task='{key['clerks']}']"},
                {"texts": f"{rows}, #auth-toggle, #view p.meta"},
                {"screenshot": "offered-tasks"},
                {"click": f"button.claim[data-task='{key['ann']}']"},
                {"waitFor": f"button.complete[data-task='{key['ann']}']"},
                {"texts": rows},
                {"click": "#sign-out"},
                {"open": "#/instances"},
                {"texts": "#auth-toggle, #view h1"},
                {"auth": {"scheme": "basic", "user": "bob", "password": "bob-secret"}},
                {"open": "#/tasks"},
                {"waitFor": f"button.claim[data-task='{key['bob']}']"},
                {"texts": rows},
            ],
            "offered-tasks",
        )
        assignee = w.rest.call("GET", f"/v2/user-tasks/{key['ann']}")["assignee"]
    finally:
        w.process.stop()
    assert seen[0]["heading"] == "Sign in"
    refused, heading = seen[2]["texts"]  # the form, above the view
    assert heading == "Sign in" and refused.startswith("The gateway refused these credentials"), refused
    ann, clerks, bob = (str(instances[n]) for n in ("ann", "clerks", "bob"))
    shown = seen[5]["texts"]  # in the page's order: the header, then the view
    assert shown[:4] == ["Signed in as ann", "Claiming as ann.", "Assigned to you (0)", "You may claim (2)"]
    assert sorted(shown[4:]) == sorted([ann, clerks]), "not bob's task: only those offered to her or her group"
    assert seen[9]["texts"] == ["Assigned to you (1)", ann, "You may claim (1)", clerks]
    assert assignee == "ann"
    assert seen[11]["heading"] == "Sign in" and seen[12]["texts"] == ["Sign in", "Sign in"]
    assert seen[16]["texts"] == ["Assigned to you (0)", "You may claim (1)", bob]


def test_instances_show_their_business_id_and_tags(web: WebWeir, stub: Stub, browser: Browser) -> None:
    app = deploy(stub, "one-task.bpmn")
    body = {"processDefinitionId": app.pid(), "businessId": "order-4711", "tags": ["vip", "shop:eu"]}
    key = web.rest.call("POST", "/v2/process-instances", body)["processInstanceKey"]
    eventually(
        lambda: web.rest.search("process-instances", {"processInstanceKey": key}),
        timeout=HISTORY_WAIT,
        what="the instance in the history",
    )
    seen = drive(
        browser,
        web,
        [
            {"open": "#/instances"},
            {"texts": "#view tr"},
            {"open": f"#/instance/{key}"},
            {"texts": "#view p.meta"},
        ],
        "business-ids",
    )
    (row,) = [text for text in seen[1]["texts"] if key in text]
    assert "order-4711" in row and "vip" in row and "shop:eu" in row
    (meta,) = seen[3]["texts"]
    assert "business id order-4711" in meta and "vip" in meta and "shop:eu" in meta


def in_history(web: WebWeir, entity: str, filter_: dict[str, Any], count: int = 1) -> list[dict[str, Any]]:
    """The history's matches once it holds ``count`` of them."""
    return eventually(
        lambda: (found := web.rest.search(entity, filter_)) and len(found) >= count and found,
        timeout=HISTORY_WAIT,
        what=f"{count} {entity} matching {filter_} in the history",
    )


def keys_shown(step: dict[str, Any]) -> list[str]:
    return [text for text in step["texts"] if text.isdigit()]


def test_instance_list_pages_and_filters(web: WebWeir, stub: Stub, browser: Browser) -> None:
    order = deploy(stub, "web-order.bpmn")
    pid = order.pid()
    keys = [
        web.rest.call("POST", "/v2/process-instances", {"processDefinitionId": pid, "businessId": f"{pid}-{n}"})[
            "processInstanceKey"
        ]
        for n in range(3)
    ]
    (job,) = activate_now(stub, order.type("check-stock"), 1)
    stub.FailJob(gateway_pb.FailJobRequest(jobKey=job.key, retries=0, errorMessage="no stock service"))
    failing = str(job.processInstanceKey)
    in_history(web, "process-instances", {"processDefinitionId": pid}, 3)
    in_history(web, "process-instances", {"processDefinitionId": pid, "hasIncident": True})

    links = "#view td a[href^='#/instance/']"
    seen = drive(
        browser,
        web,
        [
            {"open": f"#/instances?process={pid}&limit=2"},
            {"texts": links},
            {"texts": ".pager .range"},
            {"submit": ".pager a[rel=next]"},
            {"texts": links},
            {"texts": ".pager .range, .pager a"},
            {"open": "#/instances?limit=2"},
            {"select": "#instance-filter select[name=process]", "value": pid},
            {"check": "#instance-filter input[name=incidents]"},
            {"submit": "#instance-filter button[type=submit]"},
            {"texts": links},
            {"fill": "#instance-filter input[name=businessId]", "text": f"{pid}-2"},
            {"check": "#instance-filter input[name=incidents]", "checked": False},
            {"submit": "#instance-filter button[type=submit]"},
            {"texts": "#view tbody tr"},
            {"open": f"#/instances?process={pid}&startedTo=2000-01-01T00:00"},
            {"texts": "#view p.empty"},
            {"open": f"#/instances?process={pid}&startedFrom=2000-01-01T00:00&state=ACTIVE"},
            {"texts": links},
            {"screenshot": "instance-list"},
        ],
        "instance-list",
    )
    # two pages (instances started in the same millisecond may come in either order): together all three, once
    first, second = keys_shown(seen[1]), keys_shown(seen[4])
    assert (len(first), len(second)) == (2, 1) and sorted(first + second) == sorted(keys)
    assert seen[2]["texts"] == ["1–2 of 3"]
    assert "from=2" in seen[3]["url"]
    assert seen[5]["texts"] == ["← Previous", "3–3 of 3"]
    assert f"process={pid}" in seen[9]["url"] and "incidents=true" in seen[9]["url"]
    assert keys_shown(seen[10]) == [failing]
    (row,) = seen[14]["texts"]  # incidents off, business id on
    assert f"{pid}-2" in row and keys[2] in row and "Order" in row and "ACTIVE" in row
    assert seen[16]["texts"] == ["No process instance matches: start one with `weir create PROCESS_ID`."]
    assert sorted(keys_shown(seen[18])) == sorted(keys)


def test_an_operator_moves_a_token_and_migrates_the_instance(web: WebWeir, stub: Stub, browser: Browser) -> None:
    order = deploy(stub, "web-order.bpmn")
    key = create(stub, order.pid(), {"orderId": 5})
    waiting = {"processInstanceKey": str(key), "elementId": "check-stock", "state": "ACTIVE"}
    in_history(web, "element-instances", waiting)
    content, _, _ = unique_copy("web-order.bpmn", order.suffix)
    content = content.replace(b'name="Ship order"', b'name="Ship the order"')
    request = gateway_pb.DeployResourceRequest(resources=[gateway_pb.Resource(name="order-v2.bpmn", content=content)])
    (v2,) = stub.DeployResource(request, timeout=10).deployments
    v2_key = str(v2.process.processDefinitionKey)
    assert v2.process.version == 2
    in_history(web, "process-definitions", {"processDefinitionKey": v2_key})

    seen = drive(
        browser,
        web,
        [
            {"open": f"#/instance/{key}"},
            {"diagram": True},
            {"click": "details.repair:nth-of-type(1) summary"},
            {"texts": "#move select[name=source] option"},
            {"select": "#move select[name=target]", "value": "ship"},
            {"click": "#move button.move"},
            {"waitFor": "#diagram[data-ready=true] .djs-element[data-element-id='ship'].weir-active"},
            {"diagram": True},
            {"screenshot": "token-moved"},
            # a mapping that leaves the active element out is refused: the page shows the problem's detail
            {"click": "details.repair:nth-of-type(2) summary"},
            {"select": "#migrate select[name=targetVersion]", "value": v2_key},
            {"waitFor": "#migrate select[data-source='ship']"},
            {"texts": "#migrate select[data-source] option:checked"},
            {"screenshot": "migrate-mapping"},
            {"select": "#migrate select[data-source='ship']", "value": ""},
            {"click": "#migrate button.migrate"},
            {"click": "details.repair:nth-of-type(2) summary"},
            {"select": "#migrate select[name=targetVersion]", "value": v2_key},
            {"waitFor": "#migrate select[data-source='ship']"},
            {"click": "#migrate button.migrate"},
            {"texts": "#view h1, #view p.meta"},
            {"screenshot": "migrated"},
        ],
        "repair",
    )
    # the instance page shows the flow taken to the active element
    assert seen[1]["markers"]["to-check"] == ["weir-taken"]
    assert seen[1]["markers"]["check-stock"] == ["weir-active"]
    assert "to-ship" not in seen[1]["markers"]
    (token,) = seen[3]["texts"]
    assert token.startswith("Check stock")
    assert_no_error(seen[5]["notice"])
    assert seen[7]["markers"]["ship"] == ["weir-active"]
    assert "check-stock" not in seen[7]["markers"] or seen[7]["markers"]["check-stock"] != ["weir-active"]
    ship = web.one("element-instances", {"processInstanceKey": str(key), "elementId": "ship"})
    assert ship["state"] == "ACTIVE"
    stock = web.one("element-instances", {"processInstanceKey": str(key), "elementId": "check-stock"})
    assert stock["state"] == "TERMINATED"

    # prefilled by equal ids: every element of version 1 maps to its namesake in version 2
    assert seen[12]["texts"] == [
        "Order received (received)",
        "Check stock (check-stock)",
        "Ship the order (ship)",
        "Order shipped (shipped)",
    ]
    refused = seen[15]["notice"]
    assert "ship" in refused and not refused.startswith("Done"), refused
    assert_no_error(seen[19]["notice"])
    migrated = web.rest.call("GET", f"/v2/process-instances/{key}")
    assert (migrated["processDefinitionKey"], migrated["processDefinitionVersion"]) == (v2_key, 2)
    # ship still waits, now as version 2's element: its job completes the instance
    (job,) = activate_now(stub, order.type("ship"), 1)
    complete(stub, job.key)
    eventually(
        lambda: web.rest.call("GET", f"/v2/process-instances/{key}")["state"] == "COMPLETED",
        timeout=HISTORY_WAIT,
        what="the migrated instance to complete",
    )


def test_a_called_instance_shows_its_call_hierarchy(web: WebWeir, stub: Stub, browser: Browser) -> None:
    app = deploy(stub, "call-activity.bpmn")
    parent = create(stub, app.pid("call-activity"))
    (child,) = in_history(web, "process-instances", {"parentProcessInstanceKey": str(parent)})
    child_key = child["processInstanceKey"]
    seen = drive(
        browser,
        web,
        [{"open": f"#/instance/{child_key}"}, {"texts": "nav.breadcrumbs li"}, {"texts": "nav.breadcrumbs a"}],
        "call-hierarchy",
    )
    assert seen[1]["texts"] == [f"Order with a called payment {parent}", f"Payment {child_key}"]
    assert seen[2]["texts"] == [f"Order with a called payment {parent}"]


def batch_endpoints_exist(web: WebWeir) -> bool:
    """Whether this gateway serves Camunda's batch operations, as its OpenAPI document lists them."""
    paths = web.rest.call("GET", "/v2/openapi.json")["paths"]
    return "/v2/process-instances/cancellation" in paths and "/v2/batch-operations/{batchOperationKey}" in paths


def test_batch_cancel_and_retry_from_a_list_selection(web: WebWeir, stub: Stub, browser: Browser) -> None:
    order = deploy(stub, "web-order.bpmn")
    pid = order.pid()
    failing = create(stub, pid)
    (failing_job,) = activate_now(stub, order.type("check-stock"), 1)
    doomed = [create(stub, pid) for _ in range(2)]
    stub.FailJob(gateway_pb.FailJobRequest(jobKey=failing_job.key, retries=0, errorMessage="no stock service"))
    in_history(web, "process-instances", {"processDefinitionId": pid}, 3)
    in_history(web, "incidents", {"processInstanceKey": str(failing), "state": "ACTIVE"})

    seen = drive(
        browser,
        web,
        [
            {"open": f"#/instances?process={pid}"},
            {"texts": ".batch-bar button:disabled"},
            *[{"check": f"input.select[data-instance='{k}']"} for k in doomed],
            {"texts": ".batch-bar .selection"},
            {"click": ".batch-bar button.batch-cancel"},
            {"texts": "#batch"},
            {"screenshot": "batch-cancel"},
            {"texts": ".batch-bar button:disabled"},
        ],
        "batch",
    )
    assert seen[1]["texts"] == ["Cancel selected", "Retry selected"]  # nothing selected yet
    assert seen[4]["texts"] == ["2 selected"]
    (cancel_status,) = seen[6]["texts"]
    if not batch_endpoints_exist(web):
        assert cancel_status.startswith("Batch operations are unavailable on this gateway"), cancel_status
        assert seen[8]["texts"] == ["Cancel selected", "Retry selected"]  # offered no more
        for k in doomed:
            assert web.rest.call("GET", f"/v2/process-instances/{k}")["state"] == "ACTIVE"
        return
    assert_no_error(seen[5]["notice"])
    assert "COMPLETED" in cancel_status and "2 of 2 done" in cancel_status, cancel_status
    for k in doomed:
        eventually(
            lambda k=k: web.rest.call("GET", f"/v2/process-instances/{k}")["state"] == "TERMINATED",
            timeout=HISTORY_WAIT,
            what="the batch to cancel the instance",
        )
    seen = drive(
        browser,
        web,
        [
            {"open": f"#/instances?process={pid}&incidents=true"},
            {"check": f"input.select[data-instance='{failing}']"},
            {"click": ".batch-bar button.batch-retry"},
            {"texts": "#batch"},
        ],
        "batch-retry",
    )
    assert_no_error(seen[2]["notice"])
    (retry_status,) = seen[3]["texts"]
    assert "COMPLETED" in retry_status and "1 of 1 done" in retry_status, retry_status
    eventually(
        lambda: not web.rest.search("incidents", {"processInstanceKey": str(failing), "state": "ACTIVE"}),
        timeout=HISTORY_WAIT,
        what="the batch to resolve the incident",
    )


def test_batch_progress_follows_camundas_batch_operation_answers(web: WebWeir, stub: Stub, browser: Browser) -> None:
    """The page against the documented shapes of Camunda's batch endpoints, answered in the browser: it sends a
    filter on the selected keys, then polls the batch until it ends and shows its counts."""
    order = deploy(stub, "web-order.bpmn")
    pid = order.pid()
    keys = sorted(str(create(stub, pid)) for _ in range(2))
    in_history(web, "process-instances", {"processDefinitionId": pid}, 2)
    batch_key = "2251799813690001"
    progress = [
        {"state": "CREATED", "operationsTotalCount": 0, "operationsCompletedCount": 0, "operationsFailedCount": 0},
        {"state": "ACTIVE", "operationsTotalCount": 2, "operationsCompletedCount": 1, "operationsFailedCount": 0},
        {
            "state": "PARTIALLY_COMPLETED",
            "operationsTotalCount": 2,
            "operationsCompletedCount": 1,
            "operationsFailedCount": 1,
            "endDate": "2026-01-01T00:00:00.000Z",
            "errors": [{"partitionId": 1, "type": "QUERY_FAILED", "message": "one instance was gone"}],
        },
    ]
    seen = drive(
        browser,
        web,
        [
            {
                "answer": "**/v2/process-instances/cancellation",
                "with": [
                    {
                        "status": 200,
                        "json": {"batchOperationKey": batch_key, "batchOperationType": "CANCEL_PROCESS_INSTANCE"},
                    }
                ],
            },
            {
                "answer": f"**/v2/batch-operations/{batch_key}",
                "with": [
                    {"status": 404, "json": {"title": "NOT_FOUND", "status": 404, "detail": "not yet"}},
                    *[
                        {
                            "status": 200,
                            "json": {
                                "batchOperationKey": batch_key,
                                "batchOperationType": "CANCEL_PROCESS_INSTANCE",
                                **p,
                            },
                        }
                        for p in progress
                    ],
                ],
            },
            {"open": f"#/instances?process={pid}"},
            *[{"check": f"input.select[data-instance='{k}']"} for k in keys],
            {"click": ".batch-bar button.batch-cancel"},
            {"texts": "#batch"},
            {"answered": "**/v2/process-instances/cancellation"},
            {"answered": f"**/v2/batch-operations/{batch_key}"},
            {"texts": ".batch-bar .selection"},
        ],
        "batch-progress",
    )
    assert_no_error(seen[5]["notice"])
    (status,) = seen[6]["texts"]
    assert status.startswith(f"Batch {batch_key} (canceling 2 instances): PARTIALLY_COMPLETED"), status
    assert "1 of 2 done, 1 failed" in status and "one instance was gone" in status, status
    (request,) = seen[7]["requests"]
    assert request["filter"]["processInstanceKey"]["$in"] == keys
    assert len(seen[8]["requests"]) == 4  # polled until the batch ended, past a first 404 (not indexed yet)
    assert seen[9]["texts"] == ["Select instances to cancel or retry them together."]
