"""BPMN element processors: one small processor per element kind, found through :mod:`.registry`.

The registry imports every processor, so nothing here imports it: the engine hands it in (:mod:`.lookup`).

- :mod:`.lifecycle`: the legal transitions (one literal table, checked on every transition) and the shared steps.
- :mod:`.base`: the hooks a kind implements (on activate / complete / terminate; containers: on child completed /
  terminated).
- :mod:`.commands`: the ACTIVATE_ELEMENT, COMPLETE_ELEMENT, COMPLETE_EXECUTION_LISTENER and TERMINATE_ELEMENT
  processors.
- :mod:`.execution_listeners`: the start and end listener jobs every kind runs through the shared steps.
- one module per family of kinds: process, sub-processes, call activities, tasks, gateways, catch and throw events,
  compensation events (with :mod:`.compensation`: the subscriptions of compensable activities and their handlers).
"""
