"""Layer 1: what every other layer shares — errors, config, counters, user stacks.

Nothing here imports from another graphwright layer.
"""
