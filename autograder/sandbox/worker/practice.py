"""Practice mode, worker side: run a lesson's own practice tests (pytest) and report outcomes.

Used only when the course's hidden graders are not available (a student release graded
without the instructor's token). The practice tests import the learner's code directly, so
they run here, in the untrusted worker, and what they report is the learner's to change: that
is why every renderer labels such a grade "nota de práctica" rather than a grade.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

# Each test's message is trimmed: a practice failure should read like a hint, not a log.
MAX_MESSAGE_CHARS = 1500
MAX_TRACE_LINES = 25


class _Collector:
    """A pytest plugin that keeps one outcome per test, in collection order, and tells
    `on_event` as each test starts ({"started": name}) and once its outcome is final (the
    outcome itself)."""

    def __init__(self, on_event: Callable[[dict], None] | None = None) -> None:
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.on_event = on_event

    def _tell(self, event: dict) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        entry = self.outcomes.get(nodeid)
        if entry is not None:
            self._tell({"started": entry["name"], "todo": entry["todo"]})

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        entry = self.outcomes.get(nodeid)
        if entry is not None:
            self._tell(dict(entry))

    def pytest_configure(self, config) -> None:
        config.addinivalue_line("markers", "todo(id): the TODO a practice test exercises")

    def pytest_collection_finish(self, session) -> None:
        self._tell({"collected": [{"name": e["name"], "todo": e["todo"]} for e in self.outcomes.values()]})

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            marker = item.get_closest_marker("todo")
            doc = (getattr(item.obj, "__doc__", None) or "").strip().split("\n")[0]
            self.outcomes[item.nodeid] = {
                "name": item.name,
                "todo": str(marker.args[0]) if marker and marker.args else None,
                "doc": doc[:300],
                "outcome": "error",
                "message": "",
                "trace": "",
                "duration": 0.0,
            }

    def pytest_runtest_logreport(self, report) -> None:
        entry = self.outcomes.get(report.nodeid)
        if entry is None:
            return
        entry["duration"] += float(report.duration)  # setup, call and teardown
        if report.when == "call" and report.passed:
            entry["outcome"] = "passed"
        elif report.skipped:
            entry["outcome"] = "skipped"
            entry["message"] = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else "")
        elif report.failed:
            # A failure in setup or teardown is an error of the test, not of the learner's code.
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["message"], entry["trace"] = _describe_failure(report)

    def pytest_collectreport(self, report) -> None:
        if report.failed:  # e.g. the learner's module does not even import
            self.outcomes[report.nodeid or "collect"] = {
                "name": Path(report.nodeid).name or "collect",
                "todo": None,
                "doc": "",
                "outcome": "error",
                "message": _last_line(str(report.longrepr)),
                "trace": _tail(str(report.longrepr)),
            }


def _describe_failure(report) -> tuple[str, str]:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else _last_line(str(report.longrepr))
    return message[:MAX_MESSAGE_CHARS], _tail(str(report.longrepr))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return (lines[-1] if lines else "")[:MAX_MESSAGE_CHARS]


def _tail(text: str) -> str:
    return "\n".join(text.rstrip().split("\n")[-MAX_TRACE_LINES:])


def run(root: Path, on_event: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Run the practice tests found in `root` (test_*.py) and return one dict per test;
    `on_event` is told as each test starts and ends (see _Collector)."""
    import pytest

    collector = _Collector(on_event)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugins we name
    # --confcutdir: pytest looks for conftest.py files and builds its tree only from `root` down
    # (the walled-in worker may not list the folders above it).
    args = [
        str(root),
        "--rootdir",
        str(root),
        "--confcutdir",
        str(root),
        "-c",
        os.devnull,
        "-q",
        "--tb=short",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-o",
        "python_files=test_*.py",
    ]
    pytest.main(args, plugins=[collector])
    return list(collector.outcomes.values())
