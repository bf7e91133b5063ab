"""Every workflow passes actionlint (with shellcheck on its scripts), the grading workflows
follow the rules that keep learner-controlled text out of shells and secrets out of pull
requests, and no workflow a learner release ships names a secret but GITHUB_TOKEN, checks out
another repository or mentions the hidden graders: a learner's repository holds no instructor secret."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.project import ROOT

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
        '      - run: echo "${{ github.event.pull_request.title }}"\n      - run: echo $UNQUOTED_VAR\n',
        encoding="utf-8",
    )
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
    # The practice grading waits its turn per branch; the service's submission is never held in
    # a concurrency group, where GitHub would cancel a pending run.
    assert "concurrency" not in spec and "concurrency" not in spec["jobs"]["submit"]
    job = spec["jobs"]["grade"]
    assert (
        job["concurrency"]["group"].startswith("grade-") and job["concurrency"]["cancel-in-progress"] is False
    )
    assert spec["permissions"] == {}
    assert job["timeout-minutes"] <= 30
    assert job["permissions"] == {"contents": "write", "statuses": "write"}
    install = next(s for s in job["steps"] if s.get("id") == "install")
    assert "--index-url https://download.pytorch.org/whl/cpu" in install["run"]
    assert "torch==2.13.0" in install["run"]
    writers = [
        s
        for s in job["steps"]
        if "run" in s and ("ci record" in s["run"] or "autograder.github.api" in s["run"])
    ]
    assert writers and all(s.get("if") == "github.event_name != 'pull_request'" for s in writers)
    # Grades with what is in the checkout: nothing fetched, no credential but the run's own.
    assert [s["uses"] for s in job["steps"] if "uses" in s] == [
        "actions/checkout@v4",
        "actions/setup-python@v5",
        "actions/upload-artifact@v4",
    ]
    assert not (job["steps"][0].get("with") or {})  # this repository, at the pushed commit
    assert set(spec["env"]) == {"OUT"} and "env" not in job
    grade = next(s for s in job["steps"] if s.get("id") == "grade")
    assert "autograder grade --format json" in grade["run"] and "preserve-env" not in grade["run"]
    # The status's context comes from the report step: "autograder / práctica" for a practice grade.
    status = next(s for s in job["steps"] if s.get("name") == "Show the XP as a commit status")
    assert status["env"]["STATUS_CONTEXT"] == "${{ steps.report.outputs.status_context }}"
    assert '--context "$STATUS_CONTEXT"' in status["run"]
    assert leaks(ROOT / ".github" / "workflows" / "grade.yml") == []
    header = spec_header(ROOT / ".github" / "workflows" / "grade.yml")
    assert "PRACTICE" in header and "never a record" in header and "grade-all" in header


def spec_header(path: Path) -> str:
    """The comment block a workflow file starts with, as one line of text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return " ".join(
        line.lstrip("# ")
        for line in lines[: next(i for i, text in enumerate(lines) if not text.startswith("#"))]
    )


# --- no secret and no hidden grader in a learner's repository ---------------------------------

_SECRET = re.compile(r"\bsecrets\s*(?:\.\s*([A-Za-z_][\w-]*)|\[)")
_SECRETS_CONTEXT = re.compile(r"\$\{\{[^}]*\bsecrets\b(?!\s*\.\s*GITHUB_TOKEN\b)[^}]*\}\}")


def leaks(path: Path) -> list[str]:
    """What in one workflow file could hand a learner an instructor's credential or the hidden
    graders: `secrets.X` (or `secrets[...]`, or the whole `secrets` context in an expression)
    other than GITHUB_TOKEN, a job passing secrets on, an actions/checkout step with
    `repository:` or `token:`, any mention of AUTOGRADER_GRADERS. Written independently of
    autograder/course/release.py's own refusal, which it checks after the fact."""
    text = path.read_text(encoding="utf-8")
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _SECRET.finditer(line):
            if match.group(1) != "GITHUB_TOKEN":
                found.append(f"{path.name}:{number}: {match.group(0)}")
        if _SECRETS_CONTEXT.search(line):
            found.append(f"{path.name}:{number}: the secrets context")
        if "autograder_graders" in line.lower():
            found.append(f"{path.name}:{number}: AUTOGRADER_GRADERS")
    spec = yaml.safe_load(text)
    for name, job in (spec.get("jobs") or {}).items():
        if "secrets" in job:
            found.append(f"{path.name}: job {name} passes secrets on")
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout"):
                for key in sorted({"repository", "token", "ssh-key"} & set(step.get("with") or {})):
                    found.append(f"{path.name}: job {name}: actions/checkout with {key}")
    return found


@pytest.fixture(scope="module")
def released_workflows(course, tmp_path_factory) -> list[Path]:
    from autograder.course.release import build_release

    out = tmp_path_factory.mktemp("release") / "release"
    build_release(course, out)
    return sorted((out / ".github" / "workflows").glob("*.yml"))


def test_no_released_workflow_names_a_secret_or_fetches_the_graders(released_workflows):
    assert [p.name for p in released_workflows] == ["grade-comment.yml", "grade.yml"]
    for path in released_workflows:
        assert leaks(path) == [], path.name


PLANTED = {
    # The learner release's grade.yml before it stopped holding secrets: fetch the instructor's graders with a
    # token, then let the learner's own engine grade with them.
    "the old fetch": (
        """\
      - name: Fetch the hidden graders
        if: vars.AUTOGRADER_GRADERS_REPO != ''
        uses: actions/checkout@v4
        with:
          repository: ${{ vars.AUTOGRADER_GRADERS_REPO }}
          token: ${{ secrets.AUTOGRADER_GRADERS_TOKEN }}
          path: .autograder-graders
""",
        [
            "secrets.AUTOGRADER_GRADERS_TOKEN",
            "AUTOGRADER_GRADERS",
            "actions/checkout with repository",
            "actions/checkout with token",
        ],
    ),
    "a secret in env": (
        "      - run: echo hi\n        env:\n          T: ${{ secrets.PAT }}\n",
        ["secrets.PAT"],
    ),
    "all secrets": (
        "      - run: echo hi\n        env:\n          T: ${{ toJSON(secrets) }}\n",
        ["the secrets context"],
    ),
    "another repository": (
        "      - uses: actions/checkout@v4\n        with:\n          repository: o/private\n",
        ["actions/checkout with repository"],
    ),
    "a checkout token": (
        "      - uses: actions/checkout@v4\n        with:\n          token: ${{ github.token }}\n",
        ["actions/checkout with token"],
    ),
    "the variable alone": ('      - run: echo "$AUTOGRADER_GRADERS"\n', ["AUTOGRADER_GRADERS"]),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_secret_check_fails_on_a_planted_workflow(released_workflows, tmp_path, name):
    """The check above is not vacuous: the released grade.yml with one planted step fails it."""
    step, expected = PLANTED[name]
    text = (released_workflows[1]).read_text(encoding="utf-8")
    anchor = "      - name: Grade every lesson\n"
    assert anchor in text
    planted = tmp_path / "grade.yml"
    planted.write_text(text.replace(anchor, step + "\n" + anchor), encoding="utf-8")
    assert yaml.safe_load(planted.read_text(encoding="utf-8"))["jobs"]["grade"]["steps"]
    found = leaks(planted)
    assert all(any(f.endswith(needle) for f in found) for needle in expected), found


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
    build_release(course, out)
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
    """The learners' systems (Linux, macOS, Windows): the same install, grading and tests on the three."""
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
    assert all(
        name in tests
        for name in (
            "tests/sandbox/test_portable.py",
            "tests/core/test_crlf.py",
            "tests/core/test_file_lock.py",
        )
    )
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
    checks = {
        kind: _inline_check(_step_running(job, f"--submission {kind}")["run"])
        for kind in ("solutions", "exercises")
    }
    results = {}
    for kind in checks:
        results[kind] = tmp_path / f"{kind}.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "autograder",
                "grade",
                "01",
                "--submission",
                str(ROOT / kind / "01-tokens-y-lotes"),
                "--format",
                "json",
                "--output",
                str(results[kind]),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
    for check in checks:
        for graded in results:
            proc = subprocess.run(
                [sys.executable, "-", str(results[graded])],
                input=checks[check],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert (proc.returncode == 0) == (check == graded), (check, graded, proc.stdout, proc.stderr)


# ------------------------------------------------------------------------------ grade-all.yml

GRADE_ALL = ROOT / ".github" / "workflows" / "grade-all.yml"
MATRIX_LIMIT = 256  # GitHub: a matrix generates at most 256 jobs per workflow run


def _grade_all() -> dict:
    return yaml.safe_load(GRADE_ALL.read_text(encoding="utf-8"))


def _plan(cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run the `plan` job's own script (the one that emits the matrix) through bash, as the
    runner does, with the inputs in its environment; its $GITHUB_OUTPUT as a dict."""
    import os

    step = next(s for s in _grade_all()["jobs"]["plan"]["steps"] if s.get("id") == "plan")
    assert set(step["env"]) == {"SEED", "SHARDS", "MAX_PARALLEL"}
    output = cwd / "github_output"
    output.write_text("", encoding="utf-8")
    full = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(output), "SEED": "", "SHARDS": "", **env}
    proc = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=cwd, env=full, capture_output=True, text=True, timeout=60
    )
    lines = output.read_text(encoding="utf-8").splitlines()
    return proc, dict(line.split("=", 1) for line in lines)


def test_grade_all_shards_default_to_the_plans_job_limit_capped_at_the_matrix_limit(tmp_path):
    import json

    spec = _grade_all()
    inputs = _triggers(spec)["workflow_dispatch"]["inputs"]
    assert inputs["max_parallel"]["type"] == "number" and inputs["max_parallel"]["default"] == 20  # Free plan
    assert inputs["shards"]["default"] == ""  # empty: max_parallel
    for env, count in (
        ({"MAX_PARALLEL": "20"}, 20),  # the default: every job of the Free plan at once
        ({"MAX_PARALLEL": "60"}, 60),
        ({"MAX_PARALLEL": "500"}, MATRIX_LIMIT),  # Enterprise's 500: capped
        ({"MAX_PARALLEL": "20", "SHARDS": "7"}, 7),
        ({"MAX_PARALLEL": "20", "SHARDS": "256"}, 256),
        ({"MAX_PARALLEL": "20", "SHARDS": "257"}, MATRIX_LIMIT),
        ({"MAX_PARALLEL": "20", "SHARDS": "1"}, 1),
    ):
        proc, out = _plan(tmp_path, **env)
        assert proc.returncode == 0, (env, proc.stdout, proc.stderr)
        assert out["count"] == str(count) and json.loads(out["shards"]) == list(range(1, count + 1)), env
        assert ("::warning::" in proc.stdout) == (count == MATRIX_LIMIT and "256" not in env.values())
    for env in ({"MAX_PARALLEL": "0"}, {"MAX_PARALLEL": "20", "SHARDS": "x"}, {"MAX_PARALLEL": "-3"}, {}):
        proc, out = _plan(tmp_path, **{"MAX_PARALLEL": "", **env})
        assert proc.returncode != 0 and "::error::" in proc.stdout and "shards" not in out, env
    # The matrix is the plan's, and each shard is told the same N.
    grade = spec["jobs"]["grade"]
    assert grade["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert grade["env"]["SHARDS"] == "${{ needs.plan.outputs.count }}"
    assert '--shard "$SHARD/$SHARDS"' in _step_running(grade, "grade-all submissions")["run"]


def test_grade_all_reruns_with_the_previous_seed_so_cached_results_count(tmp_path):
    """grade-all skips a learner whose files and grading fingerprint (seed included) it graded
    before: a re-run keeps the seed unless told `new`, and restores each shard's folder."""
    _, first = _plan(tmp_path, MAX_PARALLEL="4")
    assert (tmp_path / ".grade-all-seed" / "seed").read_text(encoding="utf-8").strip() == first["seed"]
    _, again = _plan(tmp_path, MAX_PARALLEL="4")
    assert again["seed"] == first["seed"]
    _, fresh = _plan(tmp_path, MAX_PARALLEL="4", SEED="new")
    assert fresh["seed"] != first["seed"]  # one chance in 2**31 of a false failure
    _, given = _plan(tmp_path, MAX_PARALLEL="4", SEED="42")
    assert given["seed"] == "42"
    proc, _ = _plan(tmp_path, MAX_PARALLEL="4", SEED="4x")
    assert proc.returncode != 0

    spec = _grade_all()
    plan = spec["jobs"]["plan"]["steps"]
    restore_seed = next(s for s in plan if s.get("uses") == "actions/cache/restore@v4")
    save_seed = next(s for s in plan if s.get("uses") == "actions/cache/save@v4")
    assert restore_seed["with"]["path"] == save_seed["with"]["path"] == ".grade-all-seed"
    assert save_seed["with"]["key"].startswith(restore_seed["with"]["restore-keys"])
    steps = spec["jobs"]["grade"]["steps"]
    folder = "shards/shard-${{ matrix.shard }}"
    restore = next(
        s for s in steps if s.get("uses") == "actions/cache/restore@v4" and s["with"]["path"] == folder
    )
    save = next(s for s in steps if s.get("uses") == "actions/cache/save@v4")
    prefix = restore["with"]["restore-keys"]
    # Keyed by N (a learner's shard depends on it) and the seed (the fingerprint does).
    assert "${{ needs.plan.outputs.count }}" in prefix and "${{ needs.plan.outputs.seed }}" in prefix
    assert "${{ matrix.shard }}" in prefix
    assert save["with"] == {"path": folder, "key": restore["with"]["key"]} and restore["with"][
        "key"
    ].startswith(prefix)
    assert save["if"] == "always()"  # an interrupted shard keeps what it graded: the next run resumes
    grading = steps.index(_step_running(spec["jobs"]["grade"], "grade-all submissions"))
    assert steps.index(restore) < grading < steps.index(save)


def test_grade_all_caches_pip_on_the_pinned_cpu_torch():
    pin = re.search(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))[1]
    for name, job in _grade_all()["jobs"].items():
        installs = [s for s in job["steps"] if "pip install" in s.get("run", "")]
        if not installs:
            continue
        (install,) = installs
        assert f"torch=={pin} --index-url https://download.pytorch.org/whl/cpu" in install["run"], name
        (cache,) = [s for s in job["steps"] if s.get("uses") == "actions/cache@v4"]
        assert cache["with"]["path"] == "~/.cache/pip"
        assert f"-torch-{pin}-cpu-" in cache["with"]["key"] and cache["with"]["key"].startswith(
            cache["with"]["restore-keys"]
        )
        assert job["steps"].index(cache) < job["steps"].index(install)
        setup = next(s for s in job["steps"] if s.get("uses") == "actions/setup-python@v5")
        assert "cache" not in setup["with"], name  # one pip cache, the one keyed on torch
