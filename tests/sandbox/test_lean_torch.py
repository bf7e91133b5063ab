"""The worker runs torch without torch._dynamo (autograder/sandbox/worker/lean_torch.py).

Dynamo costs ~1.1 s of CPU to import, and two wrappers of torch import it only to tell a
compiler that is not running to keep out: the meta device's Python kernels and every
optimizer's step(). These tests show, in fresh interpreters and in real workers down every
start path, that those operations give the same results without dynamo, that dynamo stays out
of the worker, and that the wrappers become torch's own again once anything imports dynamo.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder.sandbox.client import Limits, Sandbox

# Meta operations (shapes and devices only) and two optimizer steps, printed as JSON.
EXERCISE = """
import json, sys
import torch
torch.manual_seed(0)
x = torch.zeros(2, 3, 4, device="meta")
y = (x + 1).softmax(-1) @ torch.zeros(4, 5, device="meta")
mask = torch.tril(torch.ones(3, 3, device=x.device)).view(1, 3, 3)
z = y.masked_fill(mask[..., :1] == 0, float("-inf"))
model = torch.nn.Linear(4, 2)
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).pow(2).sum().backward()
    opt.step()
print(json.dumps({"shape": list(z.shape), "device": str(z.device), "grad": torch.is_grad_enabled(),
                  "weights": model.weight.detach().tolist(), "dynamo": "torch._dynamo" in sys.modules}))
"""


def _run(prelude: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", prelude + EXERCISE], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_meta_operations_and_optimizer_steps_need_no_dynamo_and_give_torchs_results():
    lean = _run("from autograder.sandbox.worker import lean_torch\nassert lean_torch.install()\n")
    plain = _run("")
    assert plain["dynamo"] is True  # without the rule, torch imports dynamo for exactly this
    assert lean["dynamo"] is False
    assert {k: v for k, v in lean.items() if k != "dynamo"} == {
        k: v for k, v in plain.items() if k != "dynamo"
    }
    assert lean["shape"] == [2, 3, 5] and lean["device"] == "meta" and lean["grad"] is True


def test_once_dynamo_is_imported_the_wrappers_are_torchs_own_again():
    """A learner's torch.compile imports dynamo: from then on the optimizer step goes through
    torch's wrapper, which calls graph_break() (counted here by replacing it)."""
    prelude = (
        "from autograder.sandbox.worker import lean_torch\nassert lean_torch.install()\n"
        "import torch, torch._dynamo\n"
        "calls = []\n"
        "torch._dynamo.graph_break = lambda: calls.append(1)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", prelude + EXERCISE + "\nprint(len(calls))\n"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) == 4  # two steps, a graph break before and after each


def test_install_after_torch_changes_nothing():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch\nfrom autograder.sandbox.worker import lean_torch\nprint(lean_torch.install())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.split() == ["False"], proc.stderr[-2000:]


@pytest.mark.parametrize("path", ["warm-pool", "fresh-worker", "portable"])
def test_no_worker_imports_dynamo_for_meta_and_optimizers(tmp_path, monkeypatch, path):
    if path == "portable":
        monkeypatch.setenv("AUTOGRADER_WORKER", "portable")
    elif not sys.platform.startswith("linux"):
        pytest.skip("the warm pool and the fresh supervisor are the Linux paths")
    # The exercise runs as the module is imported, in the worker; run() reports what it left.
    (tmp_path / "m.py").write_text(
        EXERCISE.split("print(json.dumps")[0] + "\n\ndef run():\n"
        "    return 'torch._dynamo' in sys.modules, str(z.device)\n",
        encoding="utf-8",
    )
    sandbox = Sandbox(tmp_path, Limits())
    if path != "portable":
        sandbox.warm_pool = path == "warm-pool"
    try:
        loaded, device = sandbox.call(sandbox.getattr(sandbox.module("m"), "run"))
    finally:
        sandbox.close()
    assert (loaded, device) == (False, "meta")
