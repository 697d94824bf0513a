"""make_fx in real mode never loads TorchDynamo: graphwright is its own tracer, and the
import alone takes seconds on a first trace."""
import subprocess
import sys

PROGRAM = """
import sys
import torch
import graphwright

def f(x):
    return torch.nn.functional.relu(x @ x.T).sum(0)

x = torch.randn(4, 4)
gm = graphwright.make_fx(f)(x)
torch.testing.assert_close(gm(x), f(x))
print("torch._dynamo" in sys.modules)
"""


def test_real_mode_trace_does_not_import_torch_dynamo():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
