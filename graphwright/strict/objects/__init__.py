"""The Python object model of the strict tracer: symbolic values, how real objects become
values (`wrap`), attribute lookup, operators, methods and builtins on values; NumPy arrays as
tensors of the graph with NumPy's behaviour (`numpy_arrays`, `numpy_calls`, `numpy_nodes`)."""
