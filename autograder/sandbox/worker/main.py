"""The worker: imports the learner's modules and executes what the trusted grader asks.

This process is untrusted by design: the learner's code runs here and may do anything to it.
It only ever answers with data (see autograder.sandbox.protocol); verdicts are made elsewhere.
Requests are small generic operations on an object table: import a module, get an attribute,
call something (optionally capturing what passes through a submodule or spying on a torch
function), compute vector-Jacobian products for the autograd leak check, or (practice mode
only) run the lesson's own practice tests.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from autograder.sandbox.protocol import FrameReader, ProtocolError, decode, encode, write_frame
from autograder.sandbox.worker import provenance

LIBRARIES = ("torch", "numpy", "math", "functools")
# The operations that run the learner's code with the grader's arguments: a torch error in one
# is replayed to find where its operands were made (cause_of).
REPLAYABLE = ("call", "vjp", "param_vjp")


class MissingSubmodule(Exception):
    """A grader asked to watch a submodule (e.g. attn_drop) that the learner's module lacks."""


class Worker:
    def __init__(self, root: Path, req_fd: int, resp_fd: int) -> None:
        self.root = root
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.objects: dict[int, Any] = {}
        self.next_id = 1
        self.reader = FrameReader()
        self.serving: Any = None  # the id of the request being served

    # ------------------------------------------------------------ object table
    def make_handle(self, obj: Any) -> dict:
        hid = self.next_id
        self.next_id += 1
        self.objects[hid] = obj
        try:
            text = repr(obj)[:200]
        except BaseException:  # a learner's __repr__ may raise
            text = "<?>"
        return {"$t": "handle", "id": hid, "type": type(obj).__name__, "repr": text}

    def resolve(self, v: dict) -> Any:
        hid = v.get("id")
        if hid not in self.objects:
            raise ProtocolError(f"unknown handle {hid}")
        return self.objects[hid]

    # ------------------------------------------------------------ operations
    def op_import(self, req: dict) -> Any:
        name = req["module"]
        if not (self.root / f"{name}.py").is_file():
            raise FileNotFoundError(f"{name}.py")
        return importlib.import_module(name)

    def op_library(self, req: dict) -> Any:
        # A grader sometimes needs a library object on the learner's side (a torch.Generator
        # to pass to their function): only these libraries, never an arbitrary import.
        name = req["module"]
        if name not in LIBRARIES:
            raise ProtocolError(f"library {name!r} is not available to graders")
        return importlib.import_module(name)

    def op_getattr(self, req: dict) -> Any:
        return getattr(req["target"], req["name"])

    def op_setattr(self, req: dict) -> Any:
        setattr(req["target"], req["name"], req["value"])
        return None

    def op_call(self, req: dict) -> Any:
        target = req["target"]
        fn = getattr(target, req["method"]) if req.get("method") else target
        args, kwargs = req.get("args", []), req.get("kwargs", {})
        opts = req.get("options") or {}
        if opts.get("seed") is not None:
            import torch

            torch.manual_seed(opts["seed"])
        captured: list = []
        spied: list = []
        with contextlib.ExitStack() as stack:
            for path in opts.get("capture", []):
                stack.enter_context(self._capture_inputs(target, path, captured))
            for name in opts.get("spy", []):
                stack.enter_context(self._spy(name, spied))
            if opts.get("no_grad"):
                import torch

                stack.enter_context(torch.no_grad())
            value = fn(*args, **kwargs)
        if opts.get("materialize"):
            value = list(value)
        if opts.get("capture") or opts.get("spy"):
            return {"value": value, "captured": captured, "spied": spied}
        return value

    def op_vjp(self, req: dict) -> Any:
        import torch

        fn = req["target"]
        x = req["input"].detach().clone().requires_grad_(True)
        y = fn(x)
        if not isinstance(y, torch.Tensor) or y.grad_fn is None:
            raise RuntimeError("the output does not depend on the input through autograd")
        grads = []
        for cot in req["cotangents"]:
            (g,) = torch.autograd.grad(y, x, cot, retain_graph=True, allow_unused=True)
            grads.append(torch.zeros_like(x) if g is None else g)
        return grads

    def op_param_vjp(self, req: dict) -> Any:
        # Where training needs gradients (a loss, logits) the grader asks which parameters they
        # reach: plain autograd on one forward call, never touching the module's own .grad.
        import torch

        # With input_grad, also the gradient reaching the first argument (a tensor). With
        # all_params, frozen parameters too (requires_grad set for this call only): what the
        # module computes, whether or not it would train.
        module = req["target"]
        args = list(req.get("args", []))
        wrt_input = bool(req.get("input_grad")) and bool(args) and isinstance(args[0], torch.Tensor)
        if wrt_input:
            args[0] = args[0].detach().clone().requires_grad_(True)
        frozen = [p for p in module.parameters() if not p.requires_grad] if req.get("all_params") else []
        for p in frozen:
            p.requires_grad_(True)
        try:
            return self._param_vjp(module, args, req, wrt_input)
        finally:
            for p in frozen:
                p.requires_grad_(False)

    def _param_vjp(self, module: Any, args: list, req: dict, wrt_input: bool) -> dict:
        import torch

        out = module(*args, **req.get("kwargs", {}))
        named = [(str(name), p) for name, p in module.named_parameters() if p.requires_grad]
        sources = [p for _, p in named] + ([args[0]] if wrt_input else [])
        results, input_grads = [], []
        for cotangent in req["cotangents"]:
            pairs = _pair_outputs(out, cotangent)
            pairs = [(o, c) for o, c in pairs if o.grad_fn is not None]
            if not pairs or not sources:
                results.append(None)  # nothing the cotangent touches depends on a parameter
                input_grads.append(None)
                continue
            grads = torch.autograd.grad(
                [o for o, _ in pairs],
                sources,
                [c.to(o.dtype) for o, c in pairs],
                retain_graph=True,
                allow_unused=True,
            )
            results.append(
                {name: torch.zeros_like(p) if g is None else g for (name, p), g in zip(named, grads)}
                if named
                else None
            )
            if wrt_input:
                input_grads.append(torch.zeros_like(args[0]) if grads[-1] is None else grads[-1])
        answer = {"output": out, "grads": results}
        if wrt_input:
            answer["input_grads"] = input_grads
        return answer

    def op_practice(self, req: dict) -> Any:
        from autograder.sandbox.worker import practice

        # Each test's outcome goes out as soon as it is known (and each test's start, so the
        # trusted side can give every test its own time budget): a test that never ends costs
        # only itself, never the outcomes of the tests before it.
        return practice.run(self.root, on_event=self.progress)

    def progress(self, value: Any) -> None:
        """A partial answer to the request being served, sent before its last answer."""
        tree, buffers = encode(value, self.make_handle)
        write_frame(self.resp_fd, {"id": self.serving, "progress": tree}, buffers)

    def op_release(self, req: dict) -> Any:
        for hid in req.get("ids", []):
            self.objects.pop(hid, None)
        return None

    # ------------------------------------------------------------ helpers
    def arg(self, tree: Any) -> Any:
        return decode(tree, self.buffers, self.resolve)

    @contextlib.contextmanager
    def _capture_inputs(self, module: Any, path: str, sink: list):
        try:
            sub = module.get_submodule(path)
        except AttributeError:
            # The grader's hook needs a part the learner's module lacks: say which, under a name
            # the trusted side reports as such (not as the learner's AttributeError).
            raise MissingSubmodule(path) from None

        def hook(_mod, inputs):
            if inputs:
                sink.append(inputs[0].detach().clone())

        handle = sub.register_forward_pre_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    @contextlib.contextmanager
    def _spy(self, dotted: str, sink: list):
        # Replace the function on its module and in every learner module that imported it by
        # name, so `from torch.nn.functional import scaled_dot_product_attention` is seen too.
        mod_name, _, attr = dotted.rpartition(".")
        owner = importlib.import_module(mod_name)
        original = getattr(owner, attr)

        def spy(*args, **kwargs):
            sink.append(
                {
                    "args": [_describe(a) for a in args],
                    "kwargs": {k: _describe(v) for k, v in kwargs.items()},
                }
            )
            return original(*args, **kwargs)

        patched = [(owner, attr)]
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if path.startswith(str(self.root)):
                for name, value in list(vars(module).items()):
                    if value is original:
                        patched.append((module, name))
        for obj, name in patched:
            setattr(obj, name, spy)
        try:
            yield
        finally:
            for obj, name in patched:
                setattr(obj, name, original)

    # ------------------------------------------------------------ loop
    def read_request(self) -> tuple[Any, list[bytes]] | None:
        while True:
            frame = self.reader.take()
            if frame is not None:
                return frame
            select.select([self.req_fd], [], [])
            chunk = os.read(self.req_fd, 1 << 20)
            if not chunk:
                return None
            self.reader.feed(chunk)

    def serve(self, isolation: dict | None = None) -> None:
        # Written before any learner code has run: the trusted side may believe this report.
        write_frame(self.resp_fd, {"ready": {"pid": os.getpid(), "isolation": isolation or {}}})
        while True:
            frame = self.read_request()
            if frame is None:
                return
            req, self.buffers = frame
            if not isinstance(req, dict):
                return
            self.serving = req.get("id")
            op = getattr(self, "op_" + str(req.get("op")), None)
            started = time.perf_counter()
            try:
                if op is None:
                    raise ProtocolError(f"unknown op {req.get('op')!r}")
                fields = {k: self.arg(v) for k, v in req.items() if k not in ("op", "id")}
                result = op(fields)
                tree, buffers = encode(result, self.make_handle)
                msg = {"id": req.get("id"), "ok": tree}
            except BaseException as exc:  # SystemExit and KeyboardInterrupt from learner code too
                msg, buffers = {"id": req.get("id"), "error": _describe_exception(exc)}, []
                cause = self.cause_of(exc, req, time.perf_counter() - started)
                if cause is not None:
                    msg["error"]["cause"] = cause
            write_frame(self.resp_fd, msg, buffers)

    def cause_of(self, exc: BaseException, req: dict, elapsed: float) -> dict | None:
        """For a learner's torch error in a call: where the values of the operation that failed
        were made (worker/provenance.py replays the call once, on copies; the trusted side,
        engine/provenance.py, reads the answer). Only on this failure path: a call that returns
        costs nothing more than reading the clock."""
        name = str(req.get("op"))
        if name not in REPLAYABLE or not isinstance(exc, provenance.ELIGIBLE):
            return None
        try:
            fields = {k: self.arg(v) for k, v in req.items() if k not in ("op", "id")}
        except BaseException:  # noqa: BLE001 - the request decoded once; if not now, no answer
            return None
        return provenance.explain(str(self.root), exc, elapsed, fields, getattr(self, "op_" + name))


def _pair_outputs(out: Any, cotangent: Any) -> list:
    """(output tensor, cotangent) pairs of one call's output and a cotangent of the same
    structure: a tensor, or a tuple/list whose None entries ask for nothing."""
    import torch

    if isinstance(cotangent, torch.Tensor):
        return [(out, cotangent)] if isinstance(out, torch.Tensor) else []
    if isinstance(cotangent, (list, tuple)) and isinstance(out, (list, tuple)) and len(out) == len(cotangent):
        return [
            (o, c)
            for o, c in zip(out, cotangent)
            if isinstance(o, torch.Tensor) and isinstance(c, torch.Tensor) and o.shape == c.shape
        ]
    return []


def _describe(value: Any) -> Any:
    """A spied argument, reduced to what a check may ask about it."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": True, "shape": list(value.shape), "dtype": str(value.dtype)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": type(value).__name__}


def _describe_exception(exc: BaseException) -> dict:
    frames = [
        {"filename": f.filename, "lineno": f.lineno or 0, "name": f.name, "line": (f.line or "")[:300]}
        for f in traceback.extract_tb(exc.__traceback__)
    ][-30:]
    if isinstance(exc, SyntaxError) and isinstance(exc.filename, str) and isinstance(exc.lineno, int):
        # A syntax error's place is not a frame of its traceback: add it as the innermost one,
        # so the trusted side can point at the learner's line (and the TODO it belongs to).
        frames.append(
            {
                "filename": exc.filename,
                "lineno": exc.lineno,
                "name": "<module>",
                "line": (exc.text or "").rstrip("\n")[:300],
            }
        )
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable>"
    # The class names along the MRO, so the trusted side can judge "is a ValueError" the way
    # isinstance would (a learner's subclass of the expected exception passes).
    bases = [type(exc).__name__] + [
        cls.__name__ for cls in type(exc).__mro__ if cls.__module__ == "builtins"
    ][:20]
    return {"type": type(exc).__name__, "message": message[:4000], "frames": frames, "bases": bases}


def _warm_up(torch) -> None:
    # Autograd and scaled_dot_product_attention initialise lazily (~0.5 s on first use); pay
    # that now, while the trusted process is still starting, rather than inside a check.
    x = torch.randn(1, 2, 3, 4, requires_grad=True)
    torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True).sum().backward()
    torch.nn.functional.softmax(x.detach(), dim=-1)
    # The first optimizer and the first operation on the "meta" device (lessons 02-06 check
    # the device contract there, lesson 05 trains) set up their Python wrappers: paid here, not
    # in a check. They no longer import torch._dynamo (~1.1 s of CPU): see lean_torch.py.
    weight = torch.nn.Parameter(torch.zeros(2))
    weight.grad = torch.ones(2)
    torch.optim.AdamW([weight], lr=0.1).step()
    torch.empty(2, device="meta") + 1


def prepare_libraries() -> None:
    """Import and warm up what every worker needs, before any learner code: a failure here is
    ours, not theirs, and TF32 is off for every float32 comparison on a GPU. One thread: the
    sandbox's limits assume it, and the warm pool (zygote.py) may only fork a single-threaded
    process."""
    from autograder.sandbox.worker import lean_torch

    lean_torch.install()  # before torch is imported
    import numpy  # noqa: F401
    import torch

    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _warm_up(torch)


def serve(root: Path, req_fd: int, resp_fd: int, walls: dict | None = None) -> None:
    """Serve the grader's requests for the learner's files in `root` (the current folder),
    walled in first as `walls` says (autograder/sandbox/worker/confine.py; None: not at all)."""
    sys.path.insert(0, str(root))
    sys.dont_write_bytecode = True
    # Everything of ours the worker may import later, imported while it still can: once
    # walled in, it cannot read the engine's folder (which holds the hidden graders).
    from autograder.sandbox.worker import practice  # noqa: F401

    listen_for_stack_requests()
    report = None
    if walls is not None and walls.get("enabled", True):
        from autograder.sandbox.worker.confine import confine

        report = confine({**walls, "root": str(root)})
    elif walls is not None:
        report = {"disabled": True}
    forget_config(walls)
    Worker(root, req_fd, resp_fd).serve(report)


def listen_for_stack_requests() -> None:
    """On SIGUSR1, write this process's Python stacks to fd 2 (the worker's log): how the trusted
    side learns where the learner's code was when a check ran out of time, before it kills the
    worker (autograder/sandbox/client.py, Sandbox.sample_stack). faulthandler writes from the
    signal handler itself, so the stack comes even when the code is stuck inside a C call (a huge
    torch operation, a sleep). What it writes is advisory: the learner's code could write the
    same words, and they never award a point."""
    import faulthandler
    import signal

    if hasattr(signal, "SIGUSR1"):
        # A copy of fd 2: pytest's output capture (the practice tests run here) and the
        # learner's code may point fd 2 elsewhere; the copy still reaches the log.
        faulthandler.register(signal.SIGUSR1, file=os.dup(2), all_threads=True, chain=False)


def forget_config(*configs: dict | None) -> None:
    """Empty what told this worker how to wall itself in (deny lists, the host's namespaces and
    uid, its environment), in place, and take the copy off its command line: the learner's code,
    imported next, finds none of it among its objects (gc.get_objects, sys.modules, sys.argv)
    or in the frames below its own. Landlock and seccomp already hold; they need none of it."""
    for config in configs:
        if isinstance(config, dict):
            for value in config.values():
                if isinstance(value, (dict, list)):
                    value.clear()
            config.clear()
    # An executed worker got its walls as a JSON argument (autograder/sandbox/client.py).
    sys.argv[:] = sys.argv[:3]
    orig = getattr(sys, "orig_argv", None)
    if isinstance(orig, list):
        orig[:] = [arg for arg in orig if not arg.startswith("{")]


def main() -> None:
    req_fd, resp_fd = int(sys.argv[1]), int(sys.argv[2])
    walls = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    prepare_libraries()
    serve(Path.cwd().resolve(), req_fd, resp_fd, walls)


if __name__ == "__main__":
    main()
