"""What a notebook's visible practice cell runs, in the learner's own kernel: `comprobar()`.

build.py copies the source below this docstring into the notebook (a learner's Jupyter need
not have the `autograder` package), so it uses only the standard library, IPython and pytest,
and puts only `PracticeTests` and `comprobar` into the learner's namespace. The build also
writes the call that makes `comprobar`, with the lesson's files and the catalog's texts in the
notebook's language. `comprobar(*todos)`:

1. puts the lesson's files back together from the cells the kernel has run (the last run of
   each piece wins, as for the hidden test cells: sources.files_from_history) and saves them
   beside the notebook, where the practice tests, and the notebooks of later lessons that
   import this one, find them;
2. runs the lesson's practice tests (test_practica.py, which a cell above it writes) with
   pytest in a fresh process, so what is tested is always the code last run;
3. prints one line per test: ✔ or ✘, the test, the TODO it exercises and, if it failed, why;
   then how many pass and which TODO to look at next.

It grades nothing: only the hidden test cells count. While nbgrader grades a notebook
($AUTOGRADER_COURSE is set by the course's nbgrader_config.py) it says so and runs nothing.
"""


class PracticeTests:
    """The lesson's practice tests, run on the files the learner's cells make up."""

    TIMEOUT = 300  # seconds: the practice tests of a lesson take a few
    MAX_LINES = 8  # of one failure's message
    MAX_CHARS = 600
    # The first line of a cell that holds a piece of a lesson file (sources.header_line).
    PY_HEADER = r"^#\s*(?P<file>[\w.\-]+\.py)\s*\[\s*(?P<part>\d+)\s*/\s*(?P<parts>\d+)\s*\]\s*$"
    # Run in the fresh process: pytest with a plugin that keeps each test's TODO and outcome.
    RUNNER = r"""
import json, os, sys
import pytest

class Collector:
    def __init__(self, todos):
        self.todos, self.rows = set(todos), {}

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "todo(id): the TODO a practice test exercises")

    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = [], []
        for item in items:
            mark = item.get_closest_marker("todo")
            todo = str(mark.args[0]) if mark and mark.args else None
            if self.todos and todo not in self.todos:
                dropped.append(item)
                continue
            kept.append(item)
            self.rows[item.nodeid] = {"name": item.name, "todo": todo, "outcome": "error", "message": ""}
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_runtest_logreport(self, report):
        row = self.rows.get(report.nodeid)
        if row is None or row["outcome"] == "failed":
            return
        if report.when == "call" and report.passed:
            row["outcome"] = "passed"
        elif report.skipped:
            reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else ""
            row["outcome"], row["message"] = "skipped", str(reason)
        elif report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            row["outcome"], row["message"] = "failed", crash.message if crash is not None else str(report.longrepr)

    def pytest_collectreport(self, report):
        if report.failed:
            lines = [line for line in str(report.longrepr).strip().split("\n") if line.strip()]
            last = lines[-1].strip() if lines else ""
            self.rows["<collect>"] = {"name": None, "todo": None, "outcome": "collect",
                                      "message": last[1:].strip() if last.startswith("E ") else last}

job = json.loads(sys.argv[2])
collector = Collector(job["todos"])
args = ["-q", "--color=no", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", ".",
        "-o", "python_files=test_*.py"]
code = pytest.main([*job["tests"], *args], plugins=[collector])
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"code": int(code), "rows": list(collector.rows.values())}, out)
"""

    def __init__(self, lesson, files, tests, texts, uses=(), todos=(), pending=r"(?!)"):
        self.lesson, self.files, self.tests, self.texts = lesson, list(files), list(tests), dict(texts)
        self.uses, self.todos = list(uses), list(todos)  # [(lesson id, folder)], the TODO ids in order
        # How a stub's error names its TODO: core/regions.py's PENDING_PATTERN, written by the build
        # (the kernel has no autograder package); the default recognises none.
        self.pending = pending

    def __call__(self, *todos):
        import os

        if os.environ.get("AUTOGRADER_COURSE"):
            print(self.texts["grading"])
            return
        unknown = [todo for todo in todos if todo not in self.todos]
        if unknown:
            print(
                self.texts["unknown_todo"].format(
                    todos=", ".join(f"[{t}]" for t in unknown), known=", ".join(self.todos)
                )
            )
            return
        if not self._save_files():
            return
        absent = [name for name in self.tests if not os.path.isfile(name)]
        if absent:
            print(self.texts["no_tests"].format(files=", ".join(absent)))
            return
        result = self._run(todos)
        if result is not None:
            self._report(result, todos)

    # --- 1. the files -------------------------------------------------------------------

    def _save_files(self):
        """Write the lesson's .py files from the cells the kernel ran; False if one never ran."""
        import re
        from pathlib import Path

        from IPython import get_ipython

        shell = get_ipython()
        history = list(shell.history_manager.input_hist_raw) if shell is not None else []
        latest = {}
        for source in history:
            head, _, body = source.partition("\n")
            match = re.match(self.PY_HEADER, head.strip())
            if match and match["file"] in self.files:
                latest[(match["file"], int(match["part"]))] = (int(match["parts"]), body.strip("\n"))
        never = [name for name in self.files if not any(file == name for file, _ in latest)]
        if never:
            print(self.texts["missing_files"].format(files=", ".join(never)))
            return False
        missing = []
        for name in self.files:
            parts = max(count for (file, _), (count, _) in latest.items() if file == name)
            chunks = []
            for part in range(1, parts + 1):
                if (name, part) in latest:
                    chunks.append(latest[(name, part)][1])
                else:
                    missing.append(f"{name} [{part}/{parts}]")
            text = "\n\n\n".join(chunks) + "\n"
            path = Path(name)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        if missing:
            print(self.texts["missing_cells"].format(cells=", ".join(missing)))
        return True

    # --- 2. the tests --------------------------------------------------------------------

    def _run(self, todos):
        import json
        import os
        import subprocess
        import sys
        import tempfile

        env = {k: v for k, v in os.environ.items() if not k.startswith(("MPLBACKEND", "PYTEST_", "JPY_"))}
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugin above: fast and predictable
        with tempfile.TemporaryDirectory(prefix="practica-") as tmp:
            out = os.path.join(tmp, "resultado.json")
            job = json.dumps({"tests": self.tests, "todos": list(todos)})
            command = [sys.executable, "-c", self.RUNNER, out, job]
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=self.TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                print(self.texts["timeout"].format(seconds=self.TIMEOUT))
                return None
            if not os.path.isfile(out):
                detail = (done.stderr or done.stdout).strip()[-self.MAX_CHARS :]
                key = "no_pytest" if "No module named pytest" in detail else "crashed"
                print(self.texts[key].format(code=done.returncode, detail=detail))
                return None
            with open(out, encoding="utf-8") as file:
                return json.load(file)

    # --- 3. what the learner reads -----------------------------------------------------------

    def _report(self, result, todos):
        import re

        rows = result["rows"]
        broken = [row for row in rows if row["outcome"] == "collect"]
        if broken:
            print(self.texts["collect_error"].format(error=self._short(broken[0]["message"])))
            for lesson, folder in self.uses:
                print(self.texts["uses"].format(lesson=lesson, folder=folder))
            return
        if not rows:
            print(self.texts["none"].format(todos=", ".join(f"TODO [{t}]" for t in todos)))
            return
        print(self.texts["header"].format(lesson=self.lesson))
        pending, failing = [], []
        for row in rows:
            label = row["name"] + (f" · TODO [{row['todo']}]" if row["todo"] else "")
            if row["outcome"] == "passed":
                print(f"✔ {label}")
                continue
            waits = re.search(self.pending, row["message"])
            if waits and waits[1] == row["todo"]:
                why = self.texts["pending"].format(todo=waits[1])
            elif waits:
                why = self.texts["waits"].format(todo=waits[1])
            elif row["outcome"] == "skipped":
                why = self.texts["skipped"].format(reason=self._short(row["message"]))
            else:
                why = self._short(row["message"])
            print(f"✘ {label}: " + why.replace("\n", "\n    "))
            (pending if waits else failing).append(waits[1] if waits else row["todo"])
        passed = sum(row["outcome"] == "passed" for row in rows)
        if passed == len(rows):
            print(self.texts["all_passed"].format(total=len(rows)))
            return
        summary = self.texts["summary"].format(passed=passed, total=len(rows))
        if pending:
            summary += " " + self.texts["pending_hint"]
        blamed = [todo for todo in self.todos if todo in failing or todo in pending]
        if blamed:
            summary += " " + self.texts["next"].format(todo=blamed[0])
        print(summary)

    def _short(self, message):
        lines = str(message).strip().split("\n")
        text = "\n".join(lines[: self.MAX_LINES])
        return text[: self.MAX_CHARS] + (
            "…" if len(text) > self.MAX_CHARS or len(lines) > self.MAX_LINES else ""
        )
