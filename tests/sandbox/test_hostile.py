"""Hostile lesson-03 submissions: each tries to cheat or to harm, through the real engine.

For each one: grading completes (under an outer guard, so a hang fails the test instead of
hanging CI), the attack earns nothing (attacks that could only pay off by faking results are
built on WRONG, an implementation that fails every check, so any point would be a cheat), no
process it started is left behind, and a secret in the grader's environment reaches neither
the worker nor any output. Crashes and hangs are reported per check with a clear message, and
grading goes on with a fresh worker.
"""

from __future__ import annotations

import _thread
import base64
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.grading import grade_folder, write_submission
from support.hostile_snippets import FIRST_CALL
from support.processes import tagged_processes
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import CourseResult, Status
from autograder.engine.feedback import redact, secrets_from_environ
from autograder.render.output import render_json, render_markdown, render_text
from autograder.sandbox import isolation
from autograder.sandbox.client import PACKAGE_PARENT, worker_user

GUARD_SECONDS = 180
SECRET = "ghp_FAKE_SECRET_1234567890"
SECRET_FORMS = (SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET[::-1], SECRET[4:])
# Unique to this run: it tags every process a submission starts ("sleep 600.<digits>" for sleep).
DIGITS = str(random.SystemRandom().randrange(10**11, 10**12))
MARK = f"agmark{DIGITS}"
SLEEP_ARG = f"600.{DIGITS}"
UNPRIVILEGED = worker_user() is not None  # the grader is root: the worker runs as nobody
WALLED = isolation.probe()["official"]  # Landlock and seccomp hold on this machine

ATTENTION_CHECKS = (
    "mask-buffer",
    "future-leak",
    "future-leak-grad",
    "weights-causal",
    "short-sequences",
    "shapes",
    "heads-split",
    "scaling",
    "heads-merge",
    "reference-parity",
    "dropout-modes",
    "fused-parity",
    "fused-sdpa",
    "fused-dropout",
)
NUMPY_CHECKS = (
    "np-mask",
    "np-softmax",
    "np-softmax-stable",
    "np-attention",
    "np-attention-causal",
    "np-edges",
)
QUIZ_CHECKS = ("quiz-1", "quiz-2", "quiz-3")
FIRST_FORWARD = "future-leak"  # the first check that calls forward (mask-buffer does not)

# ------------------------------------------------------------------ WRONG: every TODO done wrong

WRONG_ATTENTION = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """Every TODO done wrong, each in a way some check sees."""

    def __init__(self, cfg, fused=False):
        super().__init__()
        self.n_head, self.n_embd, self.dropout, self.fused = cfg.n_head, cfg.n_embd, cfg.dropout, fused
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        bs = cfg.block_size
        self.register_buffer("mask", torch.ones(1, 1, bs, bs), persistent=False)  # masks nothing

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        # Heads interleaved: head h gets channels h, h + nh, h + 2 nh, ...
        q, k, v = (t.view(B, T, hs, self.n_head).permute(0, 3, 1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=False)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C)  # sqrt(C), not sqrt(hs)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_drop(F.softmax(att, dim=-1))
            att = F.dropout(att, self.dropout, training=True)  # dropout in eval mode too
            y = att @ v
        y = y.contiguous().view(B, T, C)  # heads not moved back after T
        return self.resid_drop(self.proj(y)).double()  # and the wrong dtype
'''

WRONG_NUMPY = """
import numpy as np


def causal_mask(T):
    return np.zeros((T, T))  # masks nothing


def softmax(x, axis=-1):
    e = np.exp(x)  # no max subtracted: overflows
    return e / e.sum(axis=0, keepdims=True)  # and always along axis 0


def masked_self_attention(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    weights = softmax(Q @ K.T / np.sqrt(X.shape[1]) + causal_mask(X.shape[0]), axis=-1)
    return weights @ V, weights


def count_edges(T, causal=True):
    return T * T
"""

WRONG_QUIZ = "pregunta_1: d\npregunta_2: d\npregunta_3: d\n"
WRONG = {"attention.py": WRONG_ATTENTION, "attention_numpy.py": WRONG_NUMPY, "quiz.yml": WRONG_QUIZ}

IGNORE_SIGNALS = """
import signal as _signal
for _sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGALRM, _signal.SIGHUP, _signal.SIGUSR1,
             _signal.SIGQUIT):
    _signal.signal(_sig, _signal.SIG_IGN)
"""


def with_forward_prefix(source: str, code: str) -> str:
    """`source` with `code` (indented for a method body) run first in forward()."""
    head = "    def forward(self, x):\n"
    assert source.count(head) == 1
    body = "".join("        " + line + "\n" for line in code.strip("\n").splitlines())
    return source.replace(head, head + body)


# ------------------------------------------------------------------ running them


@contextlib.contextmanager
def outer_guard(seconds: float = GUARD_SECONDS):
    """Fail, rather than hang, when grading takes longer than `seconds` (KeyboardInterrupt in
    the main thread: the engine's pytest stops, the sandbox kills its worker)."""
    fired = threading.Event()

    def fire():
        fired.set()
        _thread.interrupt_main()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        if not fired.is_set():
            raise
    finally:
        timer.cancel()
    if fired.is_set():
        pytest.fail(f"grading did not finish within {seconds} s")


def survivors() -> list[str]:
    """Processes tagged with this run's mark, in their command line or their name."""
    return tagged_processes(DIGITS, name_prefix=DIGITS[:8])


@pytest.fixture(autouse=True)
def secret_in_grader_env(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    yield


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    if not sys.platform.startswith("linux"):
        return
    end = time.monotonic() + 2
    while (found := survivors()) and time.monotonic() < end:
        time.sleep(0.05)
    assert found == [], f"processes left behind: {found}"


def texts(result) -> dict[str, str]:
    return {c.id: feedback_text(c.feedback, "es") for c in result.checks}


def statuses(result) -> dict[str, Status]:
    return {c.id: c.status for c in result.checks}


def no_secret_anywhere(result) -> None:
    """Not in any check's feedback, even before redaction: the worker never saw it."""
    everything = "\n".join(feedback_text(c.feedback, lang) for c in result.checks for lang in ("es", "en"))
    assert SECRET not in everything
    if UNPRIVILEGED:  # encoded, redaction cannot catch it: only not reading it can
        assert not any(form in everything for form in SECRET_FORMS)


def grade_hostile(course, lesson, folder: Path, files: dict[str, str]):
    write_submission(folder, files)
    started = time.monotonic()
    with outer_guard():
        result = grade_folder(course, lesson, folder)
    result.elapsed = time.monotonic() - started
    assert [c.id for c in result.checks] == [spec.id for spec in lesson.checks]  # grading completed
    no_secret_anywhere(result)
    return result


def earns_nothing(result) -> None:
    passed = [c.id for c in result.checks if c.status is Status.PASSED]
    assert passed == [] and result.score == 0, passed
    assert statuses(result)["gpu-parity"] in (Status.SKIPPED, Status.FAILED, Status.ERROR)


@pytest.fixture(scope="module")
def wrong_result(course, lesson03, tmp_path_factory):
    """The baseline: WRONG, untouched, fails every check (with its own diagnosis)."""
    folder = tmp_path_factory.mktemp("wrong")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITHUB_TOKEN", SECRET)
        return grade_hostile(course, lesson03, folder, dict(WRONG))


def test_wrong_baseline_fails_every_check_for_its_own_reasons(wrong_result):
    earns_nothing(wrong_result)
    for check in wrong_result.checks:
        if check.id != "gpu-parity":
            assert check.status is Status.FAILED, (check.id, texts(wrong_result)[check.id])
            assert texts(wrong_result)[check.id].strip()


# ------------------------------------------------------------------ leaving the process


def test_sys_exit_at_import(course, lesson03, tmp_path):
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": "import sys\nsys.exit(3)\n" + WRONG_ATTENTION,
            "attention_numpy.py": "raise SystemExit('adiós')\n" + WRONG_NUMPY,
        },
    )
    earns_nothing(result)
    got, state = texts(result), statuses(result)
    for check in ATTENTION_CHECKS:
        assert state[check] is Status.FAILED and "SystemExit" in got[check] and "attention.py:2" in got[check]
    for check in NUMPY_CHECKS:
        assert state[check] is Status.FAILED and "SystemExit" in got[check] and "adiós" in got[check]
    for check in QUIZ_CHECKS:  # graded on, as usual
        assert state[check] is Status.FAILED and "SystemExit" not in got[check]


def test_os_exit_at_import(course, lesson03, tmp_path, wrong_result):
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {**WRONG, "attention.py": "import os\nos._exit(7)\n" + WRONG_ATTENTION},
    )
    earns_nothing(result)
    got, state = texts(result), statuses(result)
    for check in ATTENTION_CHECKS:
        assert state[check] is Status.ERROR and "terminó" in got[check] and "7" in got[check], got[check]
    # The NumPy checks ran afterwards, in a fresh worker, exactly as for WRONG alone.
    for check in NUMPY_CHECKS + QUIZ_CHECKS:
        assert (state[check], got[check]) == (Status.FAILED, texts(wrong_result)[check])


def test_os_exit_in_forward_fails_that_check_and_grading_goes_on(course, lesson03, tmp_path):
    files = solution_files(lesson03)
    files["attention.py"] = FIRST_CALL + with_forward_prefix(
        files["attention.py"], 'if _first_call("exit-once"):\n    _os._exit(3)'
    )
    result = grade_hostile(course, lesson03, tmp_path / "s", files)
    got, state = texts(result), statuses(result)
    assert state[FIRST_FORWARD] is Status.ERROR
    assert "terminó" in got[FIRST_FORWARD] and "3" in got[FIRST_FORWARD]
    english = next(feedback_text(c.feedback, "en") for c in result.checks if c.id == FIRST_FORWARD)
    assert "exit" in english.lower()
    for check in state:
        if check not in (FIRST_FORWARD, "gpu-parity"):
            assert state[check] is Status.PASSED, (check, got[check])
    assert result.score == result.max_score - lesson03.check(FIRST_FORWARD).points


def test_infinite_loop_ignoring_signals_at_import(course, lesson03, tmp_path, wrong_result):
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {**WRONG, "attention.py": IGNORE_SIGNALS + "while True:\n    pass\n" + WRONG_ATTENTION},
    )
    earns_nothing(result)
    got, state = texts(result), statuses(result)
    assert state["mask-buffer"] is Status.ERROR and "Tiempo agotado" in got["mask-buffer"]
    for check in ATTENTION_CHECKS[1:]:  # the failed import is remembered: one timeout, not fourteen
        assert state[check] is Status.ERROR and "attention.py" in got[check] and "no terminó" in got[check]
    for check in NUMPY_CHECKS + QUIZ_CHECKS:
        assert (state[check], got[check]) == (Status.FAILED, texts(wrong_result)[check])
    assert result.elapsed < lesson03.check("mask-buffer").timeout + 40


def test_infinite_loop_ignoring_signals_in_forward(course, lesson03, tmp_path):
    files = solution_files(lesson03)
    files["attention.py"] = (
        IGNORE_SIGNALS
        + FIRST_CALL
        + with_forward_prefix(
            files["attention.py"], 'if _first_call("hang-once"):\n    while True:\n        pass'
        )
    )
    result = grade_hostile(course, lesson03, tmp_path / "s", files)
    got, state = texts(result), statuses(result)
    timeout = lesson03.check(FIRST_FORWARD).timeout
    assert state[FIRST_FORWARD] is Status.ERROR
    assert "Tiempo agotado" in got[FIRST_FORWARD] and f"{timeout:g} s" in got[FIRST_FORWARD]
    for check in state:
        if check not in (FIRST_FORWARD, "gpu-parity"):
            assert state[check] is Status.PASSED, (check, got[check])
    assert result.score == result.max_score - lesson03.check(FIRST_FORWARD).points


# ------------------------------------------------------------------ faking the verdict

PATCH_COMPARISONS = """
import math, unittest
import numpy
import torch

_yes = lambda *args, **kwargs: True
_quiet = lambda *args, **kwargs: None
torch.allclose = torch.equal = torch.Tensor.allclose = torch.Tensor.equal = _yes
torch.testing.assert_close = _quiet
numpy.allclose = numpy.array_equal = numpy.array_equiv = numpy.isclose = _yes
numpy.testing.assert_allclose = numpy.testing.assert_array_equal = numpy.testing.assert_equal = _quiet
math.isclose = _yes
unittest.TestCase.assertEqual = unittest.TestCase.assertTrue = _quiet
"""


def test_patching_comparisons_in_the_worker_does_not_help(course, lesson03, tmp_path, wrong_result):
    """Comparisons happen in the grader, on data: the feedback is WRONG's, word for word.
    (Patching Tensor.__eq__ is left out: it changes what WRONG itself computes, e.g. its
    masked_fill, so the comparison with WRONG's feedback would no longer hold.)"""
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": PATCH_COMPARISONS + WRONG_ATTENTION,
            "attention_numpy.py": PATCH_COMPARISONS + WRONG_NUMPY,
        },
    )
    earns_nothing(result)
    assert texts(result) == texts(wrong_result)


PATCH_MACHINERY = """
import builtins, sys
import pytest, _pytest.outcomes, _pytest.reports, _pytest.runner

_pytest.reports.TestReport.passed = property(lambda self: True)
_pytest.reports.TestReport.failed = property(lambda self: False)
_pytest.reports.BaseReport.outcome = "passed"
_pytest.runner.call_and_report = lambda *args, **kwargs: None
pytest.fail = _pytest.outcomes.fail = pytest.skip = lambda *args, **kwargs: None
pytest.approx = lambda expected, *args, **kwargs: type("Any", (), {"__eq__": lambda s, o: True})()
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.print = lambda *args, **kwargs: None

import autograder.engine.checks, autograder.engine.feedback, autograder.core.results
autograder.engine.checks.fail = autograder.engine.checks.expect = lambda *args, **kwargs: None
autograder.engine.feedback.compare = lambda *args, **kwargs: None
autograder.core.results.Status.FAILED = autograder.core.results.Status.PASSED

# Forge answers: a "verdict" frame, and an early answer to the next request.
import autograder.sandbox.worker.main as _main
_write = _main.write_frame


def _forged(fd, msg, buffers=()):
    rid = msg.get("id") if isinstance(msg, dict) else None
    _write(fd, {"verdict": "passed", "score": 100, "id": -1})
    if isinstance(rid, int):
        _write(fd, {"id": rid + 1, "ok": True})
    _write(fd, msg, buffers)


_main.write_frame = _forged
"""


def test_patching_pytest_builtins_and_the_worker_itself_does_not_help(course, lesson03, tmp_path):
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": PATCH_MACHINERY + WRONG_ATTENTION,
            "attention_numpy.py": PATCH_MACHINERY + WRONG_NUMPY,
        },
    )
    earns_nothing(result)


HOSTILE_VALUES = '''
import itertools, os, sys, tempfile
import numpy as np
import torch


def _counter(name):
    """Counts calls across workers (its file is in the worker's home)."""
    path = os.path.join(tempfile.gettempdir(), name)
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    return n


class Nasty:
    def _raise(self, *args, **kwargs):
        raise RuntimeError("gotcha")

    __repr__ = __str__ = __eq__ = __ne__ = __hash__ = __len__ = __iter__ = __bool__ = _raise
    __getattr__ = __reduce__ = __reduce_ex__ = __format__ = __index__ = __float__ = _raise


class LyingShape(torch.Tensor):
    @property
    def shape(self):
        return torch.Size([2, 7, 24])

    def size(self, *args):
        return self.shape


class AlwaysEqual(torch.Tensor):
    def __eq__(self, other):
        return True

    __ne__ = lambda self, other: False


class AlwaysEqualInt(int):
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = int.__hash__


class AlwaysEqualArray(np.ndarray):
    def __eq__(self, other):
        return True


class ClaimsToBeATensor:
    __class__ = property(lambda self: torch.Tensor)


class Passed(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def _loop():
    x = []
    x.append(x)
    return x


def hostile_output(x):
    n = _counter("forward-calls")
    choices = [
        lambda: Nasty(),
        lambda: (x for _ in range(3)),
        lambda: torch.zeros(1).as_subclass(LyingShape),
        lambda: torch.zeros_like(x).as_subclass(AlwaysEqual),
        lambda: {"passed": True, "score": 100, "status": "passed"},
        lambda: torch.empty_like(x, device="meta"),
        _loop,
        lambda: torch.zeros(x.shape, dtype=torch.complex64),
        lambda: ClaimsToBeATensor(),
    ]
    if n % (len(choices) + 1) == len(choices):
        raise Passed()
    return choices[n % (len(choices) + 1)]()
'''

HOSTILE_NUMPY = (
    HOSTILE_VALUES
    + """

def causal_mask(T):
    return (np.zeros(T) for _ in range(T))


def softmax(x, axis=-1):
    return Nasty()


def masked_self_attention(X, W_Q, W_K, W_V):
    weights = np.zeros((X.shape[0], X.shape[0])).view(AlwaysEqualArray)
    return (weights @ (X @ W_V)).view(AlwaysEqualArray), weights


def count_edges(T, causal=True):
    if _counter("edges-calls") == 0:  # garbage on the wire, once
        os.write(int(sys.argv[2]), b"this is not a frame" * 100)
    return AlwaysEqualInt(-1)
"""
)


def test_hostile_return_values(course, lesson03, tmp_path):
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": HOSTILE_VALUES + with_forward_prefix(WRONG_ATTENTION, "return hostile_output(x)"),
            "attention_numpy.py": HOSTILE_NUMPY,
        },
    )
    earns_nothing(result)
    got, state = texts(result), statuses(result)
    for check in result.checks:
        if check.status is not Status.SKIPPED:
            assert got[check.id].strip(), check.id
    assert state["np-edges"] is Status.ERROR and "ilegible" in got["np-edges"]
    for check in QUIZ_CHECKS:  # graded on after the garbage, as usual
        assert state[check] is Status.FAILED and "pregunta" in got[check]


# ------------------------------------------------------------------ fake result files, secrets

FAKE_RESULT = {
    "course": "Transformers desde cero",
    "language": "es",
    "xp": 50,
    "xp_max": 50,
    "score": 100,
    "max_score": 100,
    "seed": SEED,
    "hacked": MARK,
    "lessons": [
        {
            "id": "03",
            "slug": "atencion-causal",
            "title": "x",
            "score": 100,
            "max_score": 100,
            "xp": 50,
            "completed": True,
            "checks": [],
        }
    ],
}

FAKE_FILES = """
import json, os, subprocess, sys

FAKE = json.dumps(%(fake)r)
MARK = %(mark)r


def _plant(path):
    try:
        with open(path, "w") as fh:
            fh.write(FAKE)
        return "written"
    except OSError as exc:
        return type(exc).__name__


def _ancestors():
    pid = os.getppid()
    while pid > 1:
        yield pid
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return


def _targets():
    import autograder

    repo = os.path.dirname(os.path.dirname(autograder.__file__))
    found = ["results.json", "../results.json", os.path.join("/tmp", f"results-{MARK}.json"),
             os.path.join(os.environ.get("HOME", "."), "results.json"),
             os.path.join(repo, f"results-{MARK}.json")]
    if %(plant_graders)r:
        found.append(os.path.join(repo, "autograder", "graders", "lesson03", f"test_zz_{MARK}.py"))
    for pid in _ancestors():  # the grader's command line says where its result goes
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"--output" in argv:
            found.append(argv[argv.index(b"--output") + 1].decode())
            try:
                found.append(os.path.join(os.readlink(f"/proc/{pid}/cwd"), "results.json"))
            except OSError:
                pass
    return found


TARGETS = _targets()
PLANTED = {path: _plant(path) for path in TARGETS}
# And keep planting them after this worker is gone.
_WRITER = f"FAKE = {FAKE!r}\\nimport sys, time\\nwhile True:\\n" \\
          "    for t in sys.argv[2:]:\\n" \\
          "        try:\\n            open(t, 'w').write(FAKE)\\n" \\
          "        except OSError:\\n            pass\\n" \\
          "    time.sleep(0.05)\\n"
try:  # refused where the worker may start no process (seccomp)
    subprocess.Popen([sys.executable, "-c", _WRITER, MARK, *TARGETS], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except OSError:
    pass
""" % {"fake": FAKE_RESULT, "mark": MARK, "plant_graders": UNPRIVILEGED}
# A file planted among the hidden graders would be collected by every later grading (a worker
# that runs as the grader's own user can do it; see the report): only tried where it must fail.

READ_SECRETS = """
import base64, os


def _secrets_in(data):
    # Only this test's fake secret: a test must never echo a real one it happens to reach.
    found = []
    for entry in data.replace("\\0", "\\n").splitlines():
        name, _, value = entry.partition("=")
        if "FAKE_SECRET" in value:
            found.append(value)
    return found


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return None


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def secret_report():
    sources = {"environ": "\\n".join(f"{k}={v}" for k, v in os.environ.items()),
               "self": _read("/proc/self/environ"),
               "parent": _read(f"/proc/{os.getppid()}/environ"),
               "grandparent": _read(f"/proc/{_parent(os.getppid())}/environ")}
    try:
        others = [_read(f"/proc/{p}/environ") for p in os.listdir("/proc") if p.isdigit()]
    except OSError:  # a walled-in worker cannot list /proc
        others = []
    sources["others"] = "\\n".join(o for o in others if o)
    parts = []
    for name, data in sources.items():
        if data is None:
            parts.append(f"{name}=denied")
            continue
        leaks = _secrets_in(data)
        if not leaks:
            parts.append(f"{name}=clean")
        else:  # the secret as it is, and disguised so that no redaction can catch it
            value = leaks[0]
            parts.append(f"{name}=LEAK {value} {base64.b64encode(value.encode()).decode()} {value[::-1]}")
    return " | ".join(parts)


REPORT = secret_report()
print("secrets:", REPORT, flush=True)
"""


def assert_secret_report(text: str) -> None:
    """What the submission found, as it reported it in its exception message."""
    assert "environ=clean" in text, text
    assert "self=clean" in text or "self=denied" in text, text
    assert "parent=clean" in text or "parent=denied" in text, text
    if UNPRIVILEGED or WALLED:
        assert "LEAK" not in text, text
    if WALLED:  # Landlock: no /proc of anyone
        assert "parent=denied" in text and "grandparent=denied" in text, text


CLI_ATTENTION = (
    FAKE_FILES
    + READ_SECRETS
    + """
raise RuntimeError("secrets: " + REPORT)
"""
    + WRONG_ATTENTION
)

CLI_NUMPY = (
    READ_SECRETS
    + FIRST_CALL
    + WRONG_NUMPY.replace(
        "def causal_mask(T):\n",
        """def causal_mask(T):
    if _first_call("exit-once"):
        print("secrets again:", secret_report(), flush=True)
        os._exit(1)  # so that the worker's last output is shown in the feedback
""",
    )
)

CONTRACT = {"course", "language", "xp", "xp_max", "score", "max_score", "lessons"}
LESSON_KEYS = {"id", "slug", "title", "score", "max_score", "xp", "completed", "checks"}
CHECK_KEYS = {"id", "todo", "status", "score", "max_score", "message"}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """The real CLI, in a subprocess whose environment holds a secret, grading a submission
    that plants fake results (before and after it dies) and hunts for secrets."""
    base = tmp_path_factory.mktemp("cli")
    submission = write_submission(
        base / "submission", {**WRONG, "attention.py": CLI_ATTENTION, "attention_numpy.py": CLI_NUMPY}
    )
    cwd = base / "cwd"
    cwd.mkdir()
    output = base / "out" / "results.json"
    env = {**os.environ, "GITHUB_TOKEN": SECRET, "MY_API_KEY": SECRET + "_2"}
    env.pop("PYTEST_CURRENT_TEST", None)
    planted_in_repo = [
        PACKAGE_PARENT / f"results-{MARK}.json",
        PACKAGE_PARENT / "autograder" / "graders" / "lesson03" / f"test_zz_{MARK}.py",
    ]
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "autograder",
                "--course",
                str(ROOT / "course.yml"),
                "grade",
                "03",
                "--submission",
                str(submission),
                "--format",
                "json",
                "--output",
                str(output),
                "--seed",
                str(SEED),
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GUARD_SECONDS,
        )
        time.sleep(0.3)  # a surviving writer would have rewritten the output by now
        planted = {str(p): p.exists() for p in planted_in_repo}
        outcome = proc, output.read_text(encoding="utf-8") if output.exists() else "", cwd, planted
    finally:  # at once: a planted file must not outlive this fixture's own run
        for path in (*planted_in_repo, Path("/tmp") / f"results-{MARK}.json"):
            path.unlink(missing_ok=True)
    yield outcome


def check_contract(data: dict) -> None:
    assert CONTRACT <= set(data)
    for lesson in data["lessons"]:
        assert LESSON_KEYS <= set(lesson)
        for check in lesson["checks"]:
            assert CHECK_KEYS <= set(check)
            assert check["status"] in ("passed", "failed", "error", "skipped")
            assert isinstance(check["message"], str)
            if check["status"] in ("failed", "error"):
                assert check["message"].strip(), check["id"]


def test_cli_result_is_the_engines_not_a_planted_one(cli_run):
    proc, output, cwd, planted = cli_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(output)
    check_contract(data)
    assert "hacked" not in data and MARK not in output
    assert data["score"] == 0 and data["xp"] == 0 and data["seed"] == SEED
    checks = {c["id"]: c for c in data["lessons"][0]["checks"]}
    assert set(checks) >= set(ATTENTION_CHECKS + NUMPY_CHECKS + QUIZ_CHECKS)
    assert not any(c["status"] == "passed" for c in checks.values())
    if UNPRIVILEGED:
        # A worker run as nobody reaches neither the grader's folder (through /proc/PID/cwd)
        # nor the repository and its hidden graders. (As the grader's own user it would; the
        # CLI's output is still the engine's, as asserted above.)
        assert not (cwd / "results.json").exists()
        assert not any(planted.values()), planted


def test_cli_never_shows_a_secret(cli_run):
    proc, output, _cwd, _planted = cli_run
    for stream in (proc.stdout, proc.stderr, output):
        assert SECRET not in stream and SECRET + "_2" not in stream
        if UNPRIVILEGED:
            assert not any(form in stream for form in SECRET_FORMS)
    checks = {c["id"]: c for c in json.loads(output)["lessons"][0]["checks"]}
    assert "secrets:" in checks["mask-buffer"]["message"]  # the attack did run
    assert_secret_report(checks["mask-buffer"]["message"])
    # The worker's own output, shown when it dies, was printed with the secret in hand, if any.
    assert "secrets again:" in checks["np-mask"]["message"] and "terminó" in checks["np-mask"]["message"]


def test_secrets_in_every_rendering(course, lesson03, tmp_path):
    """In-process grading: the raw feedback, and text, JSON and Markdown as the CLI renders them."""
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": READ_SECRETS + 'raise RuntimeError("secrets: " + REPORT)\n' + WRONG_ATTENTION,
            "attention_numpy.py": CLI_NUMPY,
        },
    )
    earns_nothing(result)
    got = texts(result)
    assert_secret_report(got["mask-buffer"])
    assert "secrets again:" in got["np-mask"]
    course_result = CourseResult(course=course.name, language="es", seed=SEED, lessons=[result])
    secrets = secrets_from_environ(os.environ)
    assert SECRET in secrets
    for lang in ("es", "en"):
        for rendered in (
            render_text(course_result, lang, color=False),
            render_json(course_result, lang),
            render_markdown(course_result, lang),
        ):
            shown = redact(rendered, secrets)
            assert SECRET not in shown
            if UNPRIVILEGED:
                assert not any(form in rendered for form in SECRET_FORMS)


# ------------------------------------------------------------------ resources

HUGE = """
import numpy as np
import torch


def grow():
    chunks = []
    while True:
        chunks.append(bytes(64 << 20))
"""


def test_huge_allocations_end_as_clear_errors(course, lesson03, tmp_path):
    from autograder.sandbox.privileges import cuda_present

    if cuda_present():
        pytest.skip("no address-space limit on a CUDA machine (the GPU driver needs it)")
    numpy_file = HUGE + WRONG_NUMPY
    numpy_file = numpy_file.replace(
        "def softmax(x, axis=-1):\n", "def softmax(x, axis=-1):\n    bytearray(50 * 10**9)\n"
    )
    numpy_file = numpy_file.replace(
        "def count_edges(T, causal=True):\n", "def count_edges(T, causal=True):\n    grow()\n"
    )
    numpy_file = numpy_file.replace("    Q, K, V = X @ W_Q", "    np.empty(10**12)\n    Q, K, V = X @ W_Q")
    result = grade_hostile(
        course,
        lesson03,
        tmp_path / "s",
        {
            **WRONG,
            "attention.py": HUGE + with_forward_prefix(WRONG_ATTENTION, "torch.empty(10**12)"),
            "attention_numpy.py": numpy_file,
        },
    )
    earns_nothing(result)
    got, state = texts(result), statuses(result)
    for check in ("np-softmax", "np-softmax-stable", "np-edges"):
        assert state[check] is Status.FAILED and "MemoryError" in got[check], got[check]
    for check in ("np-attention", "np-attention-causal"):
        assert state[check] is Status.FAILED and "Unable to allocate" in got[check], got[check]
    for check in ATTENTION_CHECKS:
        if check != "mask-buffer":  # the one check that never calls forward
            assert state[check] is Status.FAILED and "allocate" in got[check], (check, got[check])


SPAWN = '''
import os, subprocess, sys

SLEEP_ARG, MARK = %(sleep)r, %(mark)r
_SLEEPER = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(600)", MARK]


def _daemon():
    """The classic double fork: a new session, and a grandchild whose parent is gone."""
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, _SLEEPER)
        os._exit(0)
    os.waitpid(child, 0)


# Each attempt on its own: where the worker may start no process (seccomp), each is refused.
for _start in (lambda: subprocess.Popen(["sleep", SLEEP_ARG], start_new_session=True),
               lambda: subprocess.Popen(_SLEEPER, start_new_session=True),
               lambda: subprocess.Popen(["/bin/sh", "-c", f"sleep {SLEEP_ARG}; sleep {SLEEP_ARG}"]),
               _daemon):
    try:
        _start()
    except OSError:
        pass
''' % {"sleep": SLEEP_ARG, "mark": MARK}


def test_background_processes_and_daemons_do_not_survive(course, lesson03, tmp_path, wrong_result):
    attack = SPAWN
    if UNPRIVILEGED:
        # Orphans go to the supervisor, the subreaper: a worker that could kill it would free
        # them. As nobody it cannot (as the grader's own user it could; see the report).
        attack += (
            "\ntry:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\n"
            "try:\n    os.killpg(os.getpgid(os.getppid()), 9)\nexcept OSError:\n    pass\n"
        )
    attention = attack + with_forward_prefix(
        WRONG_ATTENTION, "try:\n    _daemon()\nexcept OSError:\n    pass"
    )
    result = grade_hostile(course, lesson03, tmp_path / "s", {**WRONG, "attention.py": attention})
    earns_nothing(result)
    assert texts(result) == texts(wrong_result)  # they changed nothing else either


FORK_SOME = """
import ctypes, os, time

def _fork():
    try:
        return os.fork()
    except OSError:  # refused where the worker may start no process (seccomp)
        return -1


for _ in range(20):  # a polite fork bomb: twenty sleepers that exec, twenty that do not
    if _fork() == 0:
        os.execv("/bin/sleep", ["sleep", %(sleep)r])
for _ in range(20):
    if _fork() == 0:
        try:
            ctypes.CDLL(None).prctl(15, %(comm)r, 0, 0, 0)  # PR_SET_NAME
        finally:
            time.sleep(600)
            os._exit(0)
""" % {"sleep": SLEEP_ARG, "comm": DIGITS[:8].encode()}


def test_fork_bomb_children_are_reaped(course, lesson03, tmp_path, wrong_result):
    result = grade_hostile(
        course, lesson03, tmp_path / "s", {**WRONG, "attention_numpy.py": FORK_SOME + WRONG_NUMPY}
    )
    earns_nothing(result)
    assert texts(result) == texts(wrong_result)
