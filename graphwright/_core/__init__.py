"""Layer 1: what every other layer shares — errors, config, counters and compile times, user
stacks, log channels, dumps.

Nothing here imports from another graphwright layer.
"""
