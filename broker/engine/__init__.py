"""The workflow engine: BPMN deployment, process instances and jobs."""
