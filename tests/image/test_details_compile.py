"""torch.compile works in the runtime image: the C/C++ compiler and headers are there.

The official runtime images lack gcc, so torch.compile fails there at its first call. Here a
small compiled function runs on the CPU (inductor generates and compiles C++ for it) and gives
the same result as eager mode.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.image, pytest.mark.slow]

SCRIPT = """
import torch

def f(x):
    return torch.sin(x) * 2 + torch.cos(x) ** 2

compiled = torch.compile(f)
x = torch.randn(1024)
torch.testing.assert_close(compiled(x), f(x))
print("torch.compile ok on", x.device)
"""


def test_torch_compile_runs_on_the_cpu(container):
    running = container("python", "-c", SCRIPT)
    code = running.wait(timeout=420)
    logs = running.logs()
    assert code == 0, logs[-4000:]
    assert "torch.compile ok on cpu" in logs
