"""Layer 2: non-strict tracing (`make_fx`) and its purity checks."""
from .make_fx import make_fx
from .purity import Finding, NonstrictReport, check_nonstrict
from .trace_record import TRACE_RECORD_KEY, CapturedConstant, TraceRecord

__all__ = ["TRACE_RECORD_KEY", "CapturedConstant", "TraceRecord", "make_fx", "Finding", "NonstrictReport", "check_nonstrict"]
