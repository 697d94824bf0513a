"""The Python object model of the strict tracer: symbolic values, how real objects become
values (`wrap`), attribute lookup, operators, methods and builtins on values."""
