"""validate-cuda: prove the CUDA stack PyTorch sees works, or say exactly what is wrong.

It runs inside the image (/usr/local/bin/validate-cuda) and on any host with PyTorch, so it needs
only the standard library and torch (pynvml is used when present), and runs without installing:
`python3 scripts/validate-cuda` or `cd scripts && python3 -m validate_cuda`. Each check is judged
by a pure function (judge.py) that tests drive without a GPU; the parts that touch the GPU only
measure (measure.py). The flow: cli -> checks -> measure + judge -> report.

Exit status: 0 every check passed; 1 a check failed or was skipped; 2 bad options; 3 no GPU.
"""

import warnings

# torch warns on every import when numpy is absent (it does not need it); that noise would break
# the one-line answers. Here, so the processes spawned for the all-reduce inherit it too.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
