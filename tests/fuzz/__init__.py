"""A generator of random PyTorch programs, and the differential runner that checks them.

Programs are Python source text (so that a failure can be saved and read as a file),
drawn with Hypothesis so that every failure shrinks to a minimal program:

- `shapes`      the shape model: symbolic and fixed dimensions, broadcasting, reductions
- `builder`     the state of one drawing: scope of tensor variables, the source written so far
- `expressions` tensor expression trees over the variables in scope
- `statements`  the dispatcher over statement kinds, and nested bodies
- `control_flow`, `containers`, `python_objects`, `modules`, `mutation`, `breaks`,
  `markers`, `side_effects`, `exceptions`: one kind of statement each
- `program`     the whole program: module-level definitions, `f`, its inputs and calls
- `runner`      runs a program eagerly and compiled, compares, classifies the outcome
- `campaign`    many programs under one seed: summary, shrinking, saving what failed
- `found`       the saved programs under tests/programs/found/

`python -m fuzz --programs 1000` (from tests/, or `make fuzz N=1000`) runs a campaign.
"""
