"""zbctl's job, variable, signal, decision and resource verbs, and a job worker that runs a command per job.

Every verb goes over the gateway's gRPC API like ``weir create`` and prints one readable line (a table for activated
jobs), or the gRPC response as JSON with ``--output json``. A refused request exits 1 with one line naming the gRPC
status (``client.cli.main``). Durations (``--job-timeout``, ``--retry-backoff``) take milliseconds or units as zbctl
does: ``500ms``, ``30s``, ``5m``, ``1h``, ``1m30s``.

``weir worker TYPE --handler CMD`` is zbctl's ``create worker``: each job's variables go to the command as JSON on
stdin; a zero exit completes the job with the JSON object the command printed (nothing printed: no variables); a
non-zero exit (or output that is not a JSON object, or no exit within the job's timeout) fails the job with one retry
less and the command's stderr as the message.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from client.inspect_cli import print_table

DEFAULT_JOB_TIMEOUT = "5m"
DEFAULT_WORKER_NAME = "weir-cli"
# the longest failure message a job gets from a handler's stderr (its tail: where the error usually is)
MAX_ERROR_MESSAGE = 4000
# pause between polls that found no job (the gateway's long polling does the waiting; this only stops a spin)
IDLE_PAUSE_S = 0.1
TRANSIENT = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"})

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def duration_ms(text: str) -> int:
    """Milliseconds of ``300000``, ``500ms``, ``30s``, ``5m``, ``1h`` or combinations like ``1m30s``."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    parts = _DURATION.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (milliseconds, or like 500ms, 30s, 5m, 1h)")
    return int(sum(float(number) * _UNIT_MS[unit] for number, unit in parts))


def _pb() -> Any:
    from gateway.api import gateway_pb2

    return gateway_pb2


def _as_dict(message: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(message, preserving_proto_field_name=True)


def _report(args: argparse.Namespace, text: str, response: Any) -> int:
    if args.output == "json":
        print(json.dumps(_as_dict(response), indent=2))
    else:
        print(text)
    return 0


def _call(args: argparse.Namespace, method: str, request: Any, text: str | Callable[[Any], str]) -> int:
    """One gRPC call; prints ``text`` (or ``text(response)``), or the response as JSON with ``--output json``."""
    from client.cli import _stub

    response = getattr(_stub(args), method)(request, timeout=args.timeout)
    return _report(args, text(response) if callable(text) else text, response)


# -- job verbs ------------------------------------------------------------------------------------------------

JOB_COLUMNS = [
    ("KEY", lambda j: j.key),
    ("TYPE", lambda j: j.type),
    ("INSTANCE", lambda j: j.processInstanceKey),
    ("ELEMENT", lambda j: j.elementId),
    ("RETRIES", lambda j: j.retries),
    ("VARIABLES", lambda j: j.variables),
]


def activate_jobs(stub: Any, args: argparse.Namespace, max_jobs: int) -> list[Any]:
    """One activation: the jobs of every partition's answer (the call streams one answer per partition)."""
    request = _pb().ActivateJobsRequest(
        type=args.job_type,
        worker=args.worker,
        timeout=args.job_timeout,
        maxJobsToActivate=max_jobs,
        fetchVariable=args.fetch or [],
        requestTimeout=args.request_timeout,
    )
    deadline = args.timeout + max(args.request_timeout, 0) / 1000
    return [job for response in stub.ActivateJobs(request, timeout=deadline) for job in response.jobs]


def cmd_activate_jobs(args: argparse.Namespace) -> int:
    from client.cli import _stub

    jobs = activate_jobs(_stub(args), args, args.max_jobs)
    if args.output == "json":
        print(json.dumps({"jobs": [_as_dict(job) for job in jobs]}, indent=2))
    else:
        print_table(JOB_COLUMNS, jobs, f"No jobs of type {args.job_type} to activate.")
    return 0


def cmd_complete_job(args: argparse.Namespace) -> int:
    request = _pb().CompleteJobRequest(jobKey=args.key, variables=args.variables or "")
    return _call(args, "CompleteJob", request, f"Job {args.key} completed.")


def _error_fields(args: argparse.Namespace) -> dict[str, str]:
    """What failing a job and throwing an error for it share: the message and the variables set with it."""
    return {"errorMessage": args.error_message or "", "variables": args.variables or ""}


def cmd_fail_job(args: argparse.Namespace) -> int:
    retry = {"retries": args.retries, "retryBackOff": args.retry_backoff}
    request = _pb().FailJobRequest(jobKey=args.key, **retry, **_error_fields(args))
    return _call(args, "FailJob", request, f"Job {args.key} failed ({args.retries} retries left).")


def cmd_throw_error(args: argparse.Namespace) -> int:
    request = _pb().ThrowErrorRequest(jobKey=args.key, errorCode=args.error_code, **_error_fields(args))
    return _call(args, "ThrowError", request, f"Error {args.error_code} thrown for job {args.key}.")


def cmd_update_retries(args: argparse.Namespace) -> int:
    request = _pb().UpdateJobRetriesRequest(jobKey=args.key, retries=args.retries)
    return _call(args, "UpdateJobRetries", request, f"Job {args.key} has {args.retries} retries.")


def cmd_update_timeout(args: argparse.Namespace) -> int:
    request = _pb().UpdateJobTimeoutRequest(jobKey=args.key, timeout=args.job_timeout)
    return _call(args, "UpdateJobTimeout", request, f"Job {args.key} times out {args.job_timeout} ms from now.")


# -- variables, signals, decisions, resources -----------------------------------------------------------------


def cmd_set_variables(args: argparse.Namespace) -> int:
    request = _pb().SetVariablesRequest(elementInstanceKey=args.key, variables=args.variables, local=args.local)
    return _call(args, "SetVariables", request, lambda r: f"Variables set on {args.key} (command key {r.key}).")


def cmd_broadcast_signal(args: argparse.Namespace) -> int:
    request = _pb().BroadcastSignalRequest(signalName=args.name, variables=args.variables or "")
    return _call(args, "BroadcastSignal", request, lambda r: f"Signal {args.name} broadcast with key {r.key}.")


def cmd_evaluate_decision(args: argparse.Namespace) -> int:
    """Evaluate a decision by id (its latest version) or by key; a failed evaluation is printed and exits 1."""
    from client.cli import _stub

    pb = _pb()
    by_key = args.decision.isdigit()
    request = pb.EvaluateDecisionRequest(
        decisionKey=int(args.decision) if by_key else 0,
        decisionId="" if by_key else args.decision,
        variables=args.variables or "",
    )
    response = _stub(args).EvaluateDecision(request, timeout=args.timeout)
    failed = bool(response.failedDecisionId or response.failureMessage)
    if failed and args.output != "json":
        print(f"error: decision {response.failedDecisionId} failed: {response.failureMessage}", file=sys.stderr)
        return 1
    _report(args, f"Decision {response.decisionId} v{response.decisionVersion}: {response.decisionOutput}", response)
    return 1 if failed else 0


def cmd_delete_resource(args: argparse.Namespace) -> int:
    request = _pb().DeleteResourceRequest(resourceKey=args.key)
    return _call(args, "DeleteResource", request, f"Resource {args.key} deleted.")


# -- the worker -----------------------------------------------------------------------------------------------


def run_handler(command: list[str], variables: str, timeout_s: float) -> tuple[str | None, dict[str, Any]]:
    """Run the handler on one job's variables: (None, completion variables) or (failure message, {})."""
    try:
        done = subprocess.run(command, input=variables, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"the handler did not finish within the job's timeout ({timeout_s:g} s)", {}
    except OSError as e:
        return f"cannot run the handler {command[0]!r}: {e.strerror or e}", {}
    if done.returncode != 0:
        message = done.stderr.strip() or f"the handler exited with status {done.returncode}"
        return message[-MAX_ERROR_MESSAGE:], {}
    output = done.stdout.strip()
    if not output:
        return None, {}
    try:
        result = json.loads(output)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return f"the handler's output is not a JSON object: {output[:200]!r}", {}
    return None, result


def handle_job(stub: Any, command: list[str], job: Any) -> dict[str, Any]:
    """Run the handler for one activated job and complete or fail the job with its outcome."""
    pb = _pb()
    timeout_s = max((job.deadline - time.time() * 1000) / 1000, 1.0)
    failure, variables = run_handler(command, job.variables or "{}", timeout_s)
    outcome: dict[str, Any] = {"jobKey": str(job.key), "processInstanceKey": str(job.processInstanceKey)}
    try:
        if failure is None:
            stub.CompleteJob(pb.CompleteJobRequest(jobKey=job.key, variables=json.dumps(variables)), timeout=30)
            return {**outcome, "outcome": "completed", "variables": variables}
        retries = max(job.retries - 1, 0)
        stub.FailJob(pb.FailJobRequest(jobKey=job.key, retries=retries, errorMessage=failure), timeout=30)
        return {**outcome, "outcome": "failed", "retries": retries, "errorMessage": failure}
    except Exception as e:  # the job timed out or was canceled meanwhile: say so, keep working
        code = e.code().name if hasattr(e, "code") else type(e).__name__
        details = e.details() if hasattr(e, "details") else str(e)
        return {**outcome, "outcome": "not reported", "errorMessage": f"{code}: {details}"}


def _stop_on_sigterm() -> None:
    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def worker_batches(stub: Any, args: argparse.Namespace) -> Iterator[list[Any]]:
    """Activated jobs, batch by batch, until ``--max-jobs-handled`` were handed out (0: forever); a gateway that is
    unavailable or overloaded is retried with a growing pause, any other refusal ends the worker."""
    handed_out, pause = 0, IDLE_PAUSE_S
    while not args.max_jobs_handled or handed_out < args.max_jobs_handled:
        wanted = args.max_jobs_active
        if args.max_jobs_handled:
            wanted = min(wanted, args.max_jobs_handled - handed_out)
        try:
            jobs = activate_jobs(stub, args, wanted)
        except Exception as e:
            code = e.code().name if hasattr(e, "code") else ""
            if code not in TRANSIENT:
                raise
            print(f"warning: {code}: {e.details()}; polling again in {pause:g} s", file=sys.stderr)  # type: ignore[attr-defined]
            time.sleep(pause)
            pause = min(pause * 2, 10.0)
            continue
        pause = IDLE_PAUSE_S
        if not jobs:
            time.sleep(IDLE_PAUSE_S)
            continue
        handed_out += len(jobs)
        yield jobs


def cmd_worker(args: argparse.Namespace) -> int:
    from client.cli import _stub

    command = shlex.split(args.handler)
    if not command:
        print("error: --handler needs a command", file=sys.stderr)
        return 2
    if args.max_jobs_active < 1:
        print("error: --max-jobs-active must be at least 1", file=sys.stderr)
        return 2
    _stop_on_sigterm()
    stub = _stub(args)
    if args.output != "json":
        print(f"Worker {args.worker} handles jobs of type {args.job_type} with: {args.handler}", flush=True)
    with ThreadPoolExecutor(args.max_jobs_active) as pool:
        for jobs in worker_batches(stub, args):
            for outcome in pool.map(lambda job: handle_job(stub, command, job), jobs):
                _print_outcome(args, outcome)
    return 0


def _print_outcome(args: argparse.Namespace, outcome: dict[str, Any]) -> None:
    if args.output == "json":
        print(json.dumps(outcome), flush=True)  # one line per job, for tools that read a stream
        return
    text = f"Job {outcome['jobKey']} {outcome['outcome']}"
    if outcome["outcome"] == "failed":
        text += f" ({outcome['retries']} retries left): {outcome['errorMessage']}"
    elif outcome["outcome"] != "completed":
        text += f": {outcome['errorMessage']}"
    print(text + ".", flush=True)


# -- parser ---------------------------------------------------------------------------------------------------

VERB_HELP = {
    "activate": "activate jobs (activate jobs TYPE)",
    "complete": "complete a job (complete job KEY)",
    "fail": "fail a job (fail job KEY)",
    "throw-error": "throw a BPMN error for a job (throw-error job KEY)",
    "update": "change a job's retries or timeout (update retries|timeout KEY)",
    "set": "set variables (set variables KEY)",
    "broadcast": "broadcast a signal (broadcast signal NAME)",
    "evaluate": "evaluate a decision (evaluate decision ID|KEY)",
    "delete": "delete a deployed resource (delete resource KEY)",
}


def add_parsers(sub: Any, add_client_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """zbctl's verb-noun commands (``activate jobs``, ``complete job``, …) and ``worker``."""
    nouns: dict[str, Any] = {}

    def command(verb: str, noun: str, text: str, fn: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        if verb not in nouns:
            aliases = ["throwError"] if verb == "throw-error" else []  # zbctl's spelling
            verb_parser = sub.add_parser(verb, help=VERB_HELP[verb], aliases=aliases)
            nouns[verb] = verb_parser.add_subparsers(dest=f"{verb}_noun", required=True)
        p: argparse.ArgumentParser = nouns[verb].add_parser(noun, help=text)
        _common(p, add_client_args)
        p.set_defaults(fn=fn)
        return p

    def variables(p: argparse.ArgumentParser, text: str = "JSON object of variables") -> None:
        p.add_argument("--variables", help=text)

    p = command("activate", "jobs", "activate jobs of a type (and lock them for --job-timeout)", cmd_activate_jobs)
    _activation_args(p)
    p.add_argument("--max-jobs", type=int, default=1, help="at most this many jobs (1)")

    p = command("complete", "job", "complete a job", cmd_complete_job)
    p.add_argument("key", type=int, help="job key")
    variables(p, "JSON object of variables to complete with")

    p = command("fail", "job", "fail a job (with no retries left: an incident)", cmd_fail_job)
    p.add_argument("key", type=int, help="job key")
    p.add_argument("--retries", type=int, required=True, help="retries the job has left")
    p.add_argument("--error-message", help="why it failed")
    p.add_argument("--retry-backoff", type=duration_ms, default=0, help="wait this long before the next try (0)")
    variables(p, "JSON object of variables set on the job's task")

    p = command("throw-error", "job", "throw a BPMN error for a job", cmd_throw_error)
    p.add_argument("key", type=int, help="job key")
    p.add_argument("--error-code", required=True, help="the error code an error event catches")
    p.add_argument("--error-message", help="message of the incident when nothing catches it")
    variables(p)

    p = command("update", "retries", "set a job's retries", cmd_update_retries)
    p.add_argument("key", type=int, help="job key")
    p.add_argument("--retries", type=int, required=True, help="the job's new retries")
    p = command("update", "timeout", "give an activated job a new timeout, counted from now", cmd_update_timeout)
    p.add_argument("key", type=int, help="job key")
    p.add_argument("--job-timeout", type=duration_ms, required=True, help="the new timeout (ms, or 30s, 5m, …)")

    p = command("set", "variables", "set variables on a process instance or element instance", cmd_set_variables)
    p.add_argument("key", type=int, help="process instance or element instance key")
    p.add_argument("--variables", required=True, help="JSON object of variables")
    p.add_argument("--local", action="store_true", help="set them on that scope only (not where they are defined)")

    p = command("broadcast", "signal", "broadcast a signal", cmd_broadcast_signal)
    p.add_argument("name", help="signal name")
    variables(p)

    p = command("evaluate", "decision", "evaluate a decision", cmd_evaluate_decision)
    p.add_argument("decision", help="decision id (its latest version) or decision key")
    variables(p)

    p = command(
        "delete", "resource", "delete a deployed resource (process, decision requirements, form)", cmd_delete_resource
    )
    p.add_argument("key", type=int, help="resource key (process definition key, …)")

    p = sub.add_parser("worker", help="work on jobs of a type with a command (zbctl create worker)")
    _common(p, add_client_args)
    _activation_args(p)
    p.add_argument("--handler", required=True, help="command run per job: variables on stdin, JSON object on stdout")
    p.add_argument("--max-jobs-active", type=int, default=32, help="jobs handled at once (32)")
    p.add_argument("--max-jobs-handled", type=int, default=0, help="stop after this many jobs (0: run until stopped)")
    p.set_defaults(fn=cmd_worker, request_timeout=10_000)


def _common(p: argparse.ArgumentParser, add_client_args: Callable[[argparse.ArgumentParser], None]) -> None:
    p.add_argument("--output", choices=("text", "json"), default="text", help="a line or table (default) or JSON")
    add_client_args(p)


def _activation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_type", metavar="type", help="job type")
    p.add_argument("--worker", default=DEFAULT_WORKER_NAME, help=f"worker name ({DEFAULT_WORKER_NAME})")
    p.add_argument(
        "--job-timeout",
        type=duration_ms,
        default=duration_ms(DEFAULT_JOB_TIMEOUT),
        help=f"lock the jobs this long ({DEFAULT_JOB_TIMEOUT})",
    )
    p.add_argument("--fetch", nargs="*", help="only these variables (default: all)")
    p.add_argument(
        "--request-timeout", type=int, default=1000, help="ms to wait for jobs when none is ready (1000; worker 10000)"
    )
