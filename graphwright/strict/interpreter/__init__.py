"""The bytecode interpreter: frames, the opcode table, calls, `with` blocks, the graph under
construction and the registry of graph-break kinds. It decides what each instruction means;
how Python objects behave lives in `objects`, what was read in `guards`."""
