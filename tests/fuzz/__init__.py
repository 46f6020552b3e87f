"""Hostile-input suite: hypothesis strategies for gateway requests, REST requests, BPMN graphs and FEEL, and the
properties they are checked against on a real ``weir start``."""
