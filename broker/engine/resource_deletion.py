"""RESOURCE_DELETION DELETE (the DeleteResource RPC): a process definition, a DRG with its decisions, or a form.

As in Zeebe 8.8:

- A process definition with running instances is not deleted (INVALID_STATE). Otherwise PROCESS DELETING, then, when
  it is the latest version, its start events stop listening (timer start events CANCELED, message and signal start
  subscriptions DELETED) and the previous version's start events listen again, then PROCESS DELETED. The previous
  version is the latest again; the deleted version number is never given again.
- The deletion is made on the partition that deployed the resource and distributed to every other partition like the
  deployment was. There a resource already gone is not an error; a process definition that still has instances
  running there refuses the command, and the deploying partition delivers it again until it is taken.
"""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine import decision_processors as decisions
from broker.engine import events, signals
from broker.engine.context import ProcessingContext
from broker.engine.instance_processors import close_message_starts, replace_message_starts
from broker.protocol.enums import ProcessIntent, RejectionType, ResourceDeletionIntent, ValueType
from broker.protocol.record import Record

_PROCESS_FIELDS = (
    "bpmnProcessId",
    "version",
    "versionTag",
    "processDefinitionKey",
    "resourceName",
    "tenantId",
    "deploymentKey",
)


def delete_resource(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    key = v.get("resourceKey", cmd.key)
    distributed = bool(v.get("distributedFrom"))
    valid = isinstance(key, int) and key > 0
    process = ctx.state.processes.get(key) if valid else None
    drg = ctx.state.decision_requirements.get(key) if valid and process is None else None
    form = ctx.state.forms.get(key) if valid and process is None and drg is None else None
    if process is None and drg is None and form is None and not distributed:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to delete resource but no resource found with key `{key}`")
        return
    if not distributed and not _may_delete(ctx, process, drg, form):
        return
    if process is not None and ctx.state.processes.running_instances(key) > 0:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to delete resource with key `{key}` but there are still running instances",
        )
        return
    found = process or drg or form
    value = {"resourceKey": key, "tenantId": b.tenant_of(found) if found is not None else b.tenant_of(v)}
    ctx.event(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETING, key, value)
    if process is not None:
        _delete_process(ctx, process, distributed=distributed)
    elif drg is not None:
        decisions.delete_drg(ctx, drg)
    elif form is not None:
        decisions.delete_form(ctx, form)
    rec = ctx.event(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETED, key, value)
    ctx.respond(rec)
    if not distributed:
        command = {**value, "distributedFrom": ctx.partition_id}
        b.distribute(ctx, key, ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, command)


def _may_delete(ctx: ProcessingContext, process: dict | None, drg: dict | None, form: dict | None) -> bool:
    """Camunda's permission for deleting each kind of resource, on its id; another tenant's is not found."""
    if process is not None:
        permission, stored, resource_id = "DELETE_PROCESS", process, process["bpmnProcessId"]
    elif drg is not None:
        permission, stored, resource_id = "DELETE_DRD", drg, drg.get("decisionRequirementsId")
    else:
        assert form is not None
        permission, stored, resource_id = "DELETE_FORM", form, form.get("formId")
    return b.authorized(ctx, "RESOURCE", permission, [str(resource_id)], tenant=b.tenant_of(stored), existing=True)


def _delete_process(ctx: ProcessingContext, stored: dict, *, distributed: bool) -> None:
    """PROCESS DELETING, start events handed back to the previous version when this one is the latest, DELETED.

    Timer and signal start events live on the deploying partition only (where the deletion is not distributed);
    message start subscriptions on every partition.
    """
    key, process_id, tenant = stored["processDefinitionKey"], stored["bpmnProcessId"], b.tenant_of(stored)
    value = {name: stored[name] for name in _PROCESS_FIELDS if name in stored}
    ctx.event(ValueType.PROCESS, ProcessIntent.DELETING, key, value)
    latest = ctx.state.processes.latest(tenant, process_id)
    if latest is not None and latest["processDefinitionKey"] == key:
        close_message_starts(ctx, tenant, process_id)
        if not distributed:
            events.close_start_timers_of(ctx, key)
            for sub in ctx.state.signal_subscriptions.of_owner(key):
                events.close_signal_subscription(ctx, sub)
        previous = ctx.state.processes.version_before(tenant, process_id, stored["version"])
        if previous is not None:
            previous_key = previous["processDefinitionKey"]
            model = b.services(ctx).models.get(previous_key)
            replace_message_starts(ctx, model, previous_key, tenant)
            if not distributed:
                events.open_start_timers(ctx, model, previous_key)
                signals.replace_start_subscriptions(ctx, model, previous_key)
    ctx.event(ValueType.PROCESS, ProcessIntent.DELETED, key, value)
