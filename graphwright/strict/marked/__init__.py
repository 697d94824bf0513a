"""Marked calls: the steering functions (`graph_break`, `disable`, `mark_dynamic`) and calls of
functions marked `nonstrict_trace`, `allow_in_graph`, `leaf_function`, `disallow_in_graph`."""
