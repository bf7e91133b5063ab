"""Every workflow passes actionlint (with shellcheck on its scripts), and the grading
workflows follow the rules that keep learner-controlled text out of shells and secrets out of
pull requests."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = shutil.which("actionlint")
SHELLCHECK = shutil.which("shellcheck")


def _actionlint(paths: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    assert ACTIONLINT, "actionlint is not installed: python -m pip install -e '.[test]'"
    assert SHELLCHECK, "shellcheck is not installed: python -m pip install -e '.[test]'"
    args = [ACTIONLINT, "-no-color", "-shellcheck", SHELLCHECK, *map(str, paths)]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_workflow_passes_actionlint():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "grade.yml", "grade-comment.yml"}
    proc = _actionlint(WORKFLOWS, ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_really_reports_problems(tmp_path):
    """The linter used above is not a no-op: an injection-prone workflow is rejected."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo \"${{ github.event.pull_request.title }}\"\n      - run: echo $UNQUOTED_VAR\n",
        encoding="utf-8")
    proc = _actionlint([bad], tmp_path)
    assert proc.returncode != 0
    assert "github.event.pull_request.title" in proc.stdout  # the untrusted-input rule
    assert "SC2086" in proc.stdout  # shellcheck ran on the script


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_inside_a_script(path):
    """`${{ }}` is substituted into a script before the shell sees it: a value a learner
    controls there is code. Every value reaches a `run:` through `env:` instead."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    for job_name, job in spec["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                assert "${{" not in step["run"], f"{path.name}: {job_name}: {step.get('name')}"


def _triggers(spec: dict) -> dict:
    return spec.get("on", spec.get(True))  # YAML 1.1 reads the key `on` as True


def test_grading_workflow_contract():
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "grade.yml").read_text(encoding="utf-8"))
    triggers = _triggers(spec)
    assert set(triggers) == {"push", "pull_request", "workflow_dispatch"}
    assert triggers["push"] == {"branches-ignore": ["grades"]}  # the history branch is not graded
    assert spec["concurrency"]["group"].startswith("grade-") and spec["concurrency"]["cancel-in-progress"] is False
    assert spec["permissions"] == {}
    job = spec["jobs"]["grade"]
    assert job["timeout-minutes"] <= 30
    assert job["permissions"] == {"contents": "write", "statuses": "write"}
    install = next(s for s in job["steps"] if s.get("id") == "install")
    assert "--index-url https://download.pytorch.org/whl/cpu" in install["run"]
    assert "torch==2.13.0" in install["run"]
    writers = [s for s in job["steps"] if "run" in s and ("ci record" in s["run"] or "autograder.github.api" in s["run"])]
    assert writers and all(s.get("if") == "github.event_name != 'pull_request'" for s in writers)
    fetch = next(s for s in job["steps"] if s.get("name") == "Fetch the hidden graders")
    assert fetch["with"]["ref"] == "${{ env.AUTOGRADER_GRADERS_REF }}"
    assert fetch["with"]["persist-credentials"] is False
    assert "secrets." not in str(fetch.get("if"))  # secrets cannot be tested in `if:`; via env


def test_comment_workflow_never_runs_the_pull_requests_code():
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "grade-comment.yml").read_text(encoding="utf-8"))
    assert _triggers(spec) == {"workflow_run": {"workflows": ["Corregir"], "types": ["completed"]}}
    job = spec["jobs"]["comment"]
    checkout = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))
    assert "ref" not in (checkout.get("with") or {}) and "repository" not in (checkout.get("with") or {})
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs and all(not re.search(r"\bpip install\b|\bautograder grade\b|\bpytest\b", r) for r in runs)


def test_the_release_workflows_pass_actionlint(course, tmp_path):
    from autograder.course.release import build_release

    out = tmp_path / "release"
    build_release(course, out, graders_ref="0123456789abcdef0123456789abcdef01234567")
    workflows = sorted((out / ".github" / "workflows").glob("*.yml"))
    assert [p.name for p in workflows] == ["grade-comment.yml", "grade.yml"]
    proc = _actionlint(workflows, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _portable_job() -> dict:
    spec = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    return spec["jobs"]["portable"]


def _step_running(job: dict, needle: str) -> dict:
    found = [s for s in job["steps"] if needle in s.get("run", "")]
    assert len(found) == 1, needle
    return found[0]


def test_ci_grades_on_linux_macos_and_windows():
    """The learners' systems (issue 19): the same install, grading and tests on the three."""
    job = _portable_job()
    assert job["strategy"]["matrix"]["os"] == ["ubuntu-latest", "macos-latest", "windows-latest"]
    assert job["strategy"]["fail-fast"] is False  # one system's failure hides no other's
    assert job["runs-on"] == "${{ matrix.os }}"
    assert job["defaults"]["run"]["shell"] == "bash"  # Git Bash on Windows: one script for all
    install = _step_running(job, "pip install")["run"].splitlines()
    # The CPU torch first, from PyTorch's CPU index (as a learner is told), then the course.
    assert "--index-url https://download.pytorch.org/whl/cpu" in install[0] and "torch==2.13.0" in install[0]
    assert install[1].strip().endswith("pip install --disable-pip-version-check -e .")
    forced = _step_running(job, "AUTOGRADER_WORKER=portable")
    assert forced["if"] == "runner.os == 'Linux'"
    solutions = _step_running(job, "--submission solutions")["run"]
    stubs = _step_running(job, "--submission exercises")["run"]
    assert "python -m autograder grade --submission solutions --format json" in solutions
    assert "python -m autograder grade --submission exercises --format json" in stubs
    tests = _step_running(job, "pytest")["run"]
    assert all(name in tests for name in ("tests/test_portable.py", "tests/test_crlf.py", "tests/test_file_lock.py"))
    steps = job["steps"]
    assert steps.index(forced) < steps.index(_step_running(job, "--submission solutions"))


def _inline_check(run: str) -> str:
    """The Python that a grading step runs on its JSON (`python - FILE <<'PY' ... PY`)."""
    found = re.search(r"python - \S+ <<'PY'\n(.*?)\nPY\b", run, re.S)
    assert found, run
    return found.group(1)


def test_the_ci_grade_checks_tell_full_marks_from_zero(tmp_path):
    """The two checks the matrix runs on real grading results (lesson 01 here): the solutions'
    check accepts full marks and rejects the stubs' zero, and the other way round."""
    import sys

    job = _portable_job()
    checks = {kind: _inline_check(_step_running(job, f"--submission {kind}")["run"])
              for kind in ("solutions", "exercises")}
    results = {}
    for kind in checks:
        results[kind] = tmp_path / f"{kind}.json"
        proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "01", "--submission",
                               str(ROOT / kind / "01-tokens-y-lotes"), "--format", "json",
                               "--output", str(results[kind])],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    for check in checks:
        for graded in results:
            proc = subprocess.run([sys.executable, "-", str(results[graded])], input=checks[check],
                                  capture_output=True, text=True, timeout=60)
            assert (proc.returncode == 0) == (check == graded), (check, graded, proc.stdout, proc.stderr)
