"""User tasks: a job for a worker (``zeebe:taskDefinition`` or none), or a native user task (``zeebe:userTask``).

A native user task creates a USER_TASK entity instead of a job (see :mod:`broker.engine.user_tasks`); the element
waits until the task is completed, and terminating the element cancels the task (after its canceling listeners).
"""

from __future__ import annotations

from broker.engine import user_tasks
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.job_task import JobTaskProcessor
from broker.state.element_instance import ElementInstance


class UserTaskProcessor(JobTaskProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if element.user_task is None or not element.user_task.native:
            super().on_activate(ctx, process, element, inst)
            return
        existing = ctx.state.user_tasks.for_element(inst.key)
        if existing is not None:  # activated again after an incident: the creation goes on
            user_tasks.proceed(ctx, existing)
        elif lc.prepare(ctx, process, element, inst):
            user_tasks.create(ctx, element, inst)

    def on_terminating(self, ctx: ProcessingContext, inst: ElementInstance) -> bool:
        return user_tasks.cancel(ctx, inst)
