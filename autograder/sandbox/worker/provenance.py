"""Where the values of a failed torch operation were made (worker side: untrusted, data only).

When a grader's call into the learner's code raises a torch error (a dtype, device or shape
mismatch), the line that raised is often innocent: `y = att @ v`, given code, fails because the
learner's `scaling` TODO made `att` in float64 three lines earlier. To say so, the worker replays
the failed call once, on deep copies of its arguments, under a torch function mode that notes, for
every tensor the learner's code makes, which operation made it, at which line of the learner's
files (the innermost frame under the submission's folder), with which dtype, shape and device, and
from which input tensors. The operation that raises during the replay names its operands; what
goes back to the trusted side is the small graph of records those operands came from
(`explain`). Which TODO a line belongs to, and which operand is at fault, is decided there
(autograder/engine/provenance.py), never here: nothing this module sends awards or costs a point
by itself, and the learner's code could forge it as it can forge a traceback.

Cost: nothing while the learner's code does not raise (the worker only reads the clock before a
call). On the failure path, at most one replay per failed call, bounded in time (REPLAY_MAX_S,
checked at every torch operation) and skipped for calls that already took long (SLOW_CALL_S). The
replay runs on deep copies, with the random generators' states saved and restored around it, so
the objects and the random state later requests see are those the failed call left.

Why a replay and not tracing always: a torch function mode costs microseconds per operation on
every call, and the graders make thousands of calls on correct code; a failure is rare and is
the only place the answer is needed.
"""

from __future__ import annotations

import copy
import linecache
import os
import random
import sys
import time
import types
import weakref
from typing import Any, Callable

# Errors a torch operation raises for a mismatch of dtype, device or shape.
ELIGIBLE = (RuntimeError, ValueError, TypeError, IndexError)
# A failed call slower than this is not replayed: the check's CPU budget is for the learner's
# code, and a check started after a hang has only 3 s of it (engine/hangs.py SHORT_BUDGET_S).
SLOW_CALL_S = 0.5
# The replay's time, tracing included (a few times the call's: ~6 us more per torch operation):
# REPLAY_BASE_S + REPLAY_FACTOR x the failed call's, at most REPLAY_MAX_S.
REPLAY_BASE_S, REPLAY_FACTOR, REPLAY_MAX_S = 0.25, 4.0, 1.0
MAX_RECORDS = 50_000  # operations noted in one replay; later ones go unrecorded
MAX_SENT = 400  # records sent back: the nearest to the failing operation, breadth first
MAX_DIMS = 8
MAX_TEXT = 120


class _OutOfTime(BaseException):
    """The replay ran past its budget (a BaseException: the learner's `except Exception` lets it by)."""


def explain(
    root: str, exc: BaseException, elapsed: float, fields: dict, run: Callable[[dict], Any]
) -> dict | None:
    """What the trusted side needs to find the value that made `exc` happen, or None.

    `fields` are the failed request's fields decoded afresh (new tensors from its buffers, the
    same learner objects); `run(fields)` is the operation that failed. It runs again on a deep
    copy of `fields`; `elapsed` is how long the failed call took. Never raises: a failure here
    costs only the explanation."""
    if not _eligible(exc, root) or elapsed > SLOW_CALL_S:
        return None
    try:
        return _explain(root, exc, fields, run, min(REPLAY_MAX_S, REPLAY_BASE_S + REPLAY_FACTOR * elapsed))
    except BaseException:  # noqa: BLE001 - out of time, or the learner's code (a __deepcopy__,
        return None  # a SystemExit) raised outside the replay: no explanation, never a new error


def _eligible(exc: BaseException, root: str) -> bool:
    """A torch error may have a cause elsewhere; a pending TODO, or an error the learner's code
    raises on purpose (`raise ValueError(...)` for an unknown character, which graders ask for
    on correct code too), has none: no replay for those."""
    if not isinstance(exc, ELIGIBLE) or isinstance(exc, NotImplementedError) or "torch" not in sys.modules:
        return False
    last = exc.__traceback__
    while last is not None and last.tb_next is not None:
        last = last.tb_next
    if last is None:
        return True
    filename = last.tb_frame.f_code.co_filename
    if not filename.startswith(os.path.join(root, "")):
        return True  # raised inside torch (or another library) on the learner's behalf
    return not linecache.getline(filename, last.tb_lineno).lstrip().startswith("raise")


def _explain(
    root: str, exc: BaseException, fields: dict, run: Callable[[dict], Any], budget: float
) -> dict | None:
    import torch

    copied = fresh_copy(fields)
    prefix = os.path.join(root, "")  # the folder with its separator: "/tmp/x/" is not "/tmp/xy/"
    tracer = Tracer(prefix, time.perf_counter() + budget)
    tracer.arguments = _tensor_ids(torch, [copied.get(k) for k in ("args", "kwargs", "input")])
    tracer.existing = existing_tensors(torch, copied, prefix)
    states = _random_states(torch)
    switches = _global_switches(torch)
    try:
        with tracer:
            try:
                run(copied)
            except _OutOfTime:
                raise
            except BaseException as again:  # noqa: BLE001 - the replay's error is the one compared
                failure = tracer.failure
                if failure is None or not _same_error(exc, again) or not _caused(again, failure["exc"]):
                    return None
                return tracer.report(failure)
    finally:
        _restore_random(torch, states)
        _restore_switches(torch, switches)
    return None  # the replay did not fail: the failure depended on something not replayed


def _same_error(first: BaseException, again: BaseException) -> bool:
    return type(first) is type(again) and _text(first) == _text(again)


def _caused(final: BaseException, raised: BaseException) -> bool:
    """Whether the exception the failing operation raised is the call's final one (or what it
    was raised from, a few links down)."""
    seen = final
    for _ in range(6):
        if seen is None:
            return False
        if seen is raised:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:  # noqa: BLE001 - a learner's __str__ may raise
        return "<unprintable>"


def _random_states(torch) -> tuple:
    numpy = sys.modules.get("numpy")
    return (
        torch.random.get_rng_state(),
        random.getstate(),
        numpy.random.get_state() if numpy is not None else None,
    )


def _restore_random(torch, states: tuple) -> None:
    torch_state, python_state, numpy_state = states
    torch.random.set_rng_state(torch_state)
    random.setstate(python_state)
    if numpy_state is not None:
        sys.modules["numpy"].random.set_state(numpy_state)


def _global_switches(torch) -> tuple:
    """torch's process-wide switches a learner's code may flip and, failing half-way or cut off
    by the replay's budget, leave flipped: autograd, the default dtype, anomaly detection. The
    worker serves the grader's next call in this process, so the replay puts them back as it
    found them (a later check must never see autograd off because of a replay)."""
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_anomaly_enabled())


def _restore_switches(torch, switches: tuple) -> None:
    grad, dtype, anomaly = switches
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    torch.set_anomaly_enabled(anomaly)


def _tensor_ids(torch, value: Any, depth: int = 0) -> set[int]:
    """The ids of the tensors among a call's arguments (through lists, tuples and dicts): values
    the grader drew, as opposed to a learner object's state."""
    if isinstance(value, torch.Tensor):
        return {id(value)}
    if depth > 4:
        return set()
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    found: set[int] = set()
    for item in items:
        found |= _tensor_ids(torch, item, depth + 1)
    return found


def existing_tensors(torch, fields: Any, prefix: str, limit: int = 50_000) -> set[int]:
    """The ids of the tensors reachable, before the replay, from its copied target and arguments
    and from the learner's modules' globals (through containers, objects' attributes and their
    classes' attributes): what an operation meets that no operation of the replay made and that
    is not among these was made during the replay by a constructor the mode does not see."""
    roots: list = [fields]
    for module in list(sys.modules.values()):
        if str(getattr(module, "__file__", None) or "").startswith(prefix):
            roots.append(vars(module))
    found: set[int] = set()
    seen: set[int] = set()
    stack = [(root, 0) for root in roots]
    while stack and len(seen) < limit:
        value, depth = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            found.add(id(value))
            continue
        if depth >= 8 or isinstance(value, (str, bytes, int, float, bool, type(None))):
            continue
        if isinstance(value, (dict, types.MappingProxyType)):
            children = list(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = list(value)
        elif isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType)):
            continue
        else:
            attributes = getattr(value, "__dict__", None)
            children = (
                list(attributes.values()) if isinstance(attributes, (dict, types.MappingProxyType)) else []
            )
            if not isinstance(value, type):
                children.append(type(value))
        stack.extend((child, depth + 1) for child in children)
    return found


def fresh_copy(value: Any) -> Any:
    """A deep copy of a call's target and arguments for the replay: the learner's objects (an
    nn.Module and its parameters, a generator) are copied, so the replay changes none of the
    originals; Python modules, functions and classes are shared (deepcopy cannot copy a module)."""
    memo = {id(module): module for module in list(sys.modules.values()) if module is not None}
    return copy.deepcopy(value, memo)


class Tracer:
    """A torch function mode noting, for each tensor an operation makes, a record: the operation,
    the learner's line that ran it, the result's dtype, shape and device, and its inputs' records
    (an input made before the replay, or by code no operation of which passed through here, gets
    a record of its own saying whether it was an argument of the call, a parameter, or other
    state)."""

    def __init__(self, prefix: str, deadline: float) -> None:
        import torch

        self.torch = torch
        self.prefix, self.deadline = prefix, deadline
        self.records: list[dict] = []
        self.ids: dict[int, tuple[weakref.ref, int]] = {}
        self.arguments: set[int] = set()
        self.existing: set[int] = set()  # tensors that were there before the replay began
        self.failure: dict | None = None
        self.mode = _mode_class()(self)

    def __enter__(self) -> Tracer:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self.mode.__exit__(*exc_info)

    # ------------------------------------------------------------ each operation
    def handle(self, func, args: tuple, kwargs: dict) -> Any:
        if time.perf_counter() > self.deadline:
            raise _OutOfTime()
        try:
            out = func(*args, **kwargs)
        except Exception as exc:
            site, direct, frame = self.site()
            inputs = self.inputs(args, kwargs)
            self.failure = {
                "exc": exc,
                "op": _op_name(func),
                "site": site,
                "direct": direct,
                "operands": [self.record_of(t, site, direct) for t in inputs],
                "names": _names(frame, inputs),
            }
            raise
        if len(self.records) < MAX_RECORDS:
            made = [t for t in _flat(out) if isinstance(t, self.torch.Tensor)]
            if made:
                site, direct, _ = self.site()
                inputs = [self.record_of(t, site, direct) for t in self.inputs(args, kwargs)]
                for tensor in made:
                    self.note(
                        tensor, {"op": _op_name(func), "site": site, "direct": direct, "inputs": inputs}
                    )
        return out

    def inputs(self, args: tuple, kwargs: dict) -> list:
        tensors = []
        for value in (*args, *kwargs.values()):
            for item in _flat(value):
                if isinstance(item, self.torch.Tensor) and all(item is not t for t in tensors):
                    tensors.append(item)
        return tensors

    def site(self) -> tuple[list | None, bool, Any]:
        """The innermost frame in the learner's files ([file, line] relative to their folder),
        whether the operation was called from it directly (no torch module's forward between:
        the learner chose every operand) and the frame itself."""
        frame = sys._getframe(3)
        direct = True
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(self.prefix):
                return [name[len(self.prefix) :][:MAX_TEXT], frame.f_lineno], direct, frame
            if "torch" in name and "modules" in name:
                direct = False
            frame = frame.f_back
        return None, False, None

    def record_of(self, tensor, site: list | None, direct: bool) -> int:
        """The record of an operation's input `tensor` (`site`, `direct`: that operation's)."""
        known = self.ids.get(id(tensor))
        if known is not None and known[0]() is tensor:
            return known[1]
        torch = self.torch
        if id(tensor) in self.arguments:
            return self.note(tensor, {"external": "argument"})
        if isinstance(tensor, torch.nn.Parameter):
            return self.note(tensor, {"external": "parameter"})
        if id(tensor) in self.existing or len(self.records) >= MAX_RECORDS:
            # There before the replay; or made after the tracer stopped noting: unknown either way.
            return self.note(tensor, {"external": "state"})
        # Made during the replay by a constructor no torch function mode sees (torch.from_numpy,
        # torch.Tensor(...), torch.frombuffer): it comes from the line that first uses it or
        # before; noted as made there, which is that line's TODO when both are in one.
        return self.note(tensor, {"op": "(constructor)", "site": site, "direct": direct, "inputs": []})

    def note(self, tensor, fields: dict) -> int:
        number = len(self.records)
        self.records.append({**fields, **_looks(tensor)})
        key = id(tensor)
        try:
            ref = weakref.ref(tensor, lambda _r, key=key: self._forget(key, _r))
        except TypeError:
            return number
        self.ids[key] = (ref, number)
        return number

    def _forget(self, key: int, ref) -> None:
        known = self.ids.get(key)
        if known is not None and known[0] is ref:
            del self.ids[key]

    # ------------------------------------------------------------ the answer
    def report(self, failure: dict) -> dict:
        """The failing operation and the records its operands came from, nearest first."""
        keep: dict[int, dict] = {}
        queue = list(failure["operands"])
        while queue and len(keep) < MAX_SENT:
            number = queue.pop(0)
            if number in keep or not 0 <= number < len(self.records):
                continue
            record = self.records[number]
            keep[number] = record
            queue.extend(record.get("inputs", ()))
        return {
            "op": failure["op"],
            "site": failure["site"],
            "direct": failure["direct"],
            "operands": failure["operands"],
            "names": failure["names"],
            "records": {str(n): r for n, r in keep.items()},
        }


_MODE: list = []


def _mode_class():
    """The torch function mode handing each operation to its tracer (made on first use: torch
    is imported by then, and a worker that never replays never builds it)."""
    if not _MODE:
        from torch.overrides import TorchFunctionMode

        class TracingMode(TorchFunctionMode):
            def __init__(self, tracer: Tracer) -> None:
                super().__init__()
                self.tracer = tracer

            def __torch_function__(self, func, types, args=(), kwargs=None):
                return self.tracer.handle(func, args, kwargs or {})

        _MODE.append(TracingMode)
    return _MODE[0]


def _looks(tensor) -> dict:
    try:
        shape = [int(n) for n in tensor.shape][:MAX_DIMS]
        return {
            "dtype": str(tensor.dtype).replace("torch.", ""),
            "shape": shape,
            "device": str(tensor.device),
        }
    except Exception:  # noqa: BLE001 - a learner's tensor subclass may refuse
        return {"dtype": "?", "shape": [], "device": "?"}


def _flat(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        out = []
        for item in value[:64]:
            out.extend(item[:64] if isinstance(item, (list, tuple)) else (item,))
        return out
    return [value]


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property: Tensor.T, Tensor.mT
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return str(name)[:60]


def _names(frame, tensors: list) -> dict:
    """The learner's local names for the failing operation's operands, by record position."""
    if frame is None:
        return {}
    names = {}
    try:
        local = list(frame.f_locals.items())
    except Exception:  # noqa: BLE001
        return {}
    for n, tensor in enumerate(tensors):
        for key, value in local:
            if value is tensor and isinstance(key, str) and key.isidentifier():
                names[str(n)] = key[:MAX_TEXT]
                break
    return names
