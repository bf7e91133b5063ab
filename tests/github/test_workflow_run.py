"""The grading workflow, run locally: its own `run:` steps in order (tests/support/workflow_runner.py)
in a real clone of a learner's repository whose `origin` is a local bare repository, with the
GITHUB_* files and variables in a temp folder and a local stand-in for GitHub's REST API.

Two kinds of repository: the instructor's (the hidden graders are in the checkout's engine:
status context "autograder / XP") and a learner's, made from the release (no hidden graders,
no secret: a practice grade that says "práctica" in every channel, even for a learner whose own
engine tries to copy out every grader it can find while the organization still holds the old
graders token).

What is not exercised here: the hosted runner itself, the `uses:` actions (checkout,
setup-python, upload-artifact, download-artifact) and GitHub's real API. The install step is
skipped because this environment already has the course installed (running it would re-point
the editable install at a temp folder)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from support.fake_github import FakeGitHub
from support.project import ROOT
from support.variants import solution_files
from support.workflow_runner import LocalRunner

WORKFLOW = ROOT / ".github" / "workflows" / "grade.yml"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def day(offset: int, hour: int = 10) -> str:
    """A commit date `offset` days from today (0 today, -1 yesterday) in the course's time zone:
    the streak is counted against the real today."""
    zone = ZoneInfo("Europe/Madrid")
    today = datetime.now(zone).date()
    return datetime.combine(today + timedelta(days=offset), time(hour), zone).isoformat()


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    import os

    full = {**os.environ, **GIT_ENV, **(env or {})}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full, check=True, capture_output=True, text=True
    ).stdout.strip()


class LearnerRepo:
    """The learner's repository on "GitHub" (a bare repo) and their own working copy."""

    def __init__(self, tmp: Path, release: Path | None = None) -> None:
        self.tmp = tmp
        self.origin = tmp / "origin.git"
        git(tmp, "init", "--bare", "-b", "main", str(self.origin))
        self.work = tmp / "work"
        # The instructor's repository (graders inside the installed engine), or a student
        # release (its own engine, no hidden graders) run with that engine.
        self.release = release is not None
        if release is not None:
            shutil.copytree(release, self.work)
        else:
            self.work.mkdir()
            shutil.copy(ROOT / "pyproject.toml", self.work / "pyproject.toml")
            # A course of lesson 03 only: what is tested here is the workflow, and one lesson
            # keeps each run to a few seconds.
            manifest = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
            manifest["lessons"] = [lesson for lesson in manifest["lessons"] if lesson["id"] == "03"]
            (self.work / "course.yml").write_text(
                yaml.safe_dump(manifest, allow_unicode=True, sort_keys=False), encoding="utf-8"
            )
            shutil.copytree(
                ROOT / "exercises", self.work / "exercises", ignore=shutil.ignore_patterns("__pycache__")
            )
            shutil.copytree(ROOT / ".github", self.work / ".github")
        git(self.work, "init", "-b", "main")
        git(self.work, "remote", "add", "origin", str(self.origin))
        self.commit("Curso inicial", date=day(-3))
        self.runs = 0

    def commit(
        self, message: str, files: dict[str, str] | None = None, *, date: str, branch: str = "main"
    ) -> str:
        for name, text in (files or {}).items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        git(self.work, "add", "-A")
        git(
            self.work,
            "commit",
            "--allow-empty",
            "-m",
            message,
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )
        git(self.work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        return git(self.work, "rev-parse", "HEAD")

    def checkout(self, sha: str) -> Path:
        """What actions/checkout does: a shallow clone of the pushed commit."""
        self.runs += 1
        workspace = self.tmp / f"workspace-{self.runs}"
        git(self.tmp, "init", "-q", str(workspace))
        git(workspace, "remote", "add", "origin", f"file://{self.origin}")
        git(workspace, "fetch", "-q", "--depth", "1", "origin", sha)
        git(workspace, "checkout", "-q", "FETCH_HEAD")
        return workspace

    def history(self) -> list[dict]:
        try:
            text = git(self.origin, "show", "grades:history.jsonl")
        except subprocess.CalledProcessError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def run(self, sha: str, api: FakeGitHub, **kwargs):
        runner, workspace = self.prepare(sha, api, **kwargs)
        return runner.run(skip_ids=("install",)), workspace

    def prepare(
        self,
        sha: str,
        api: FakeGitHub,
        *,
        event_name: str = "push",
        ref: str = "refs/heads/main",
        event: dict | None = None,
        secrets: dict | None = None,
        variables: dict | None = None,
    ):
        workspace = self.checkout(sha)
        temp = self.tmp / f"runner-{self.runs}"
        temp.mkdir()
        event_path = temp / "event.json"
        event_path.write_text(json.dumps(event or {"ref": ref, "after": sha}), encoding="utf-8")
        github = {
            "event_name": event_name,
            "sha": sha,
            "ref": ref,
            "ref_name": ref.rsplit("/", 1)[-1],
            "repository": api.repository,
            "server_url": "https://github.example",
            "api_url": api.url,
            "run_id": str(1000 + self.runs),
            "event_path": str(event_path),
            "token": api.token,
            "workspace": str(workspace),
            "event": event or {},
        }
        # A release's `pip install -e .` would install its own engine: PYTHONPATH stands in.
        extra = {"PYTHONPATH": str(workspace)} if self.release else {}
        return LocalRunner(
            WORKFLOW,
            "grade",
            workspace,
            temp,
            github=github,
            extra_env=extra,
            secrets=secrets,
            variables=variables,
        ), workspace


@pytest.fixture
def repo(tmp_path):
    return LearnerRepo(tmp_path)


@pytest.fixture
def api():
    with FakeGitHub() as fake:
        yield fake


def _solved(lesson) -> dict[str, str]:
    return {f"exercises/{lesson.folder}/{name}": text for name, text in solution_files(lesson).items()}


def _lesson_summary_row(summary: str, lesson_id: str) -> str:
    return next(line for line in summary.splitlines() if line.startswith(f"| Lección {lesson_id}"))


def test_a_push_is_graded_recorded_and_reported_everywhere(repo, api, lesson03):
    sha = repo.commit("Lección 03 resuelta", _solved(lesson03), date=day(-1, 21))
    job, workspace = repo.run(sha, api)
    failed = [(s.name, s.stderr[-2000:]) for s in job.steps if s.outcome == "failure"]
    assert failed == []
    ran = [s.id or s.name for s in job.steps if s.kind == "run"]
    assert ran == [
        "grade",
        "Record the grade in the history (grades branch)",
        "report",
        "Comment on the commit",
        "Show the XP as a commit status",
    ]

    # results.json, kept as the artifact
    results = json.loads((job.artifacts / "autograder-results" / "results.json").read_text(encoding="utf-8"))
    assert results["xp"] == 50 and results["lessons"][0]["completed"] is True

    # one record on the grades branch, with the badge derived from it
    history = repo.history()
    assert [r["commit"] for r in history] == [sha]
    badge = json.loads(git(repo.origin, "show", "grades:badge.json"))
    assert badge["schemaVersion"] == 1 and "50/50" in badge["message"]

    # the job summary: XP and streak on top, the lesson table
    assert "**XP 50/50**" in job.summary and "racha de 1 día" in job.summary
    assert "✅ completada" in _lesson_summary_row(job.summary, "03")

    # step outputs, the commit status and the single commit comment
    assert job.step("report").outputs["title"] == "XP 50/50"
    assert [(s["sha"], s["description"], s["state"]) for s in api.statuses] == [(sha, "XP 50/50", "success")]
    # Graded with the hidden graders (the instructor's repository): the context of a real grade.
    assert job.step("report").outputs["status_context"] == api.statuses[0]["context"] == "autograder / XP"
    assert results["practice"] is False and results["lessons"][0]["mode"] == "hidden"
    assert api.statuses[0]["target_url"] == f"https://github.example/{api.repository}/actions/runs/1001"
    comments = api.comments_on("commit", sha)
    assert len(comments) == 1 and "XP 50/50" in comments[0]["body"]
    assert job.annotations() == []
    assert api.token not in job.summary + job.stdout + json.dumps(results)


def test_the_same_commit_twice_adds_no_record_and_one_comment(repo, api):
    sha = repo.commit("Nada aún", date=day(-1, 10))
    first, _ = repo.run(sha, api)
    remote_tip = git(repo.origin, "rev-parse", "grades")
    second, _ = repo.run(sha, api)
    assert all(s.outcome != "failure" for s in first.steps + second.steps)
    assert git(repo.origin, "rev-parse", "grades") == remote_tip  # nothing pushed
    assert [r["commit"] for r in repo.history()] == [sha]
    assert len(api.comments_on("commit", sha)) == 1  # updated, not duplicated
    assert len(api.statuses) == 2


def test_failing_checks_become_annotations_on_the_todo_line(repo, api):
    sha = repo.commit("Sin empezar", date=day(-1, 10))
    job, workspace = repo.run(sha, api)
    errors = job.annotations("error")
    assert 0 < len(errors) <= 10
    stub = (workspace / "exercises" / "03-atencion-causal" / "attention.py").read_text(encoding="utf-8")
    mask_line = next(i for i, row in enumerate(stub.splitlines(), 1) if "TODO [mask]" in row)
    mask = [e for e in errors if "TODO [mask]" in e.split("::", 2)[1]]
    assert len(mask) == 1
    assert f"file=exercises/03-atencion-causal/attention.py,line={mask_line}," in mask[0]
    assert "pendiente" in mask[0].split("::", 2)[2]
    assert "**XP 0/50**" in job.summary and "sin completar" in _lesson_summary_row(job.summary, "03")


def test_a_lesson_that_breaks_again_keeps_its_xp_but_says_it_fails_now(repo, api, lesson03):
    solved = repo.commit("Resuelta", _solved(lesson03), date=day(-1, 10))
    repo.run(solved, api)
    broken = {
        f"exercises/{lesson03.folder}/attention.py": solution_files(lesson03)["attention.py"].replace(
            "(1.0 / math.sqrt(hs))", "(1.0 / math.sqrt(C))"
        )
    }
    sha = repo.commit("Rompo el escalado", broken, date=day(0, 10))
    job, _ = repo.run(sha, api)
    row = _lesson_summary_row(job.summary, "03")
    assert "sin completar" in row and "ahora falla" in row and "50/50 |" in row
    assert "**XP 50/50**" in job.summary and "racha de 2 días" not in job.summary  # no progress on day 2
    assert [r["commit"] for r in repo.history()] == [solved, sha]


def test_two_concurrent_runs_keep_both_records(repo, api, lesson03):
    first = repo.commit("Rama a", date=day(-1, 10), branch="a")
    second = repo.commit("Rama b", _solved(lesson03), date=day(-1, 11), branch="b")
    jobs: list = []
    # Check out both first, then run the two jobs at the same time.
    runners = [
        repo.prepare(first, api, ref="refs/heads/a")[0],
        repo.prepare(second, api, ref="refs/heads/b")[0],
    ]
    threads = [
        threading.Thread(target=lambda r=r: jobs.append(r.run(skip_ids=("install",)))) for r in runners
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(jobs) == 2 and all(s.outcome != "failure" for job in jobs for s in job.steps)
    assert sorted(r["commit"] for r in repo.history()) == sorted([first, second])


def test_learner_text_with_shell_and_expression_syntax_changes_nothing(repo, api, lesson03, tmp_path):
    canary = tmp_path / "pwned"
    hostile = f'$(touch {canary}) `touch {canary}` ${{{{ github.token }}}} "; touch {canary}; echo "'
    attention = solution_files(lesson03)["attention.py"].replace(
        "    def forward(self, x):", f"    def forward(self, x):\n        raise ValueError({hostile!r})", 1
    )
    files = {**_solved(lesson03), f"exercises/{lesson03.folder}/attention.py": attention}
    branch = "feat/$(touch${IFS}pwned);touch${IFS}pwned"  # a legal git ref name
    sha = repo.commit(
        f"Mensaje $(touch {canary}) ${{{{ secrets.X }}}}", files, date=day(-1, 10), branch=branch
    )
    job, _ = repo.run(sha, api, ref=f"refs/heads/{branch}")
    assert all(s.outcome != "failure" for s in job.steps), [s.stderr[-1500:] for s in job.steps]
    assert not canary.exists() and not list(tmp_path.rglob("pwned"))
    assert "$(touch" in job.summary  # shown as text, not run
    assert api.token not in job.summary + job.stdout
    assert [r["commit"] for r in repo.history()] == [sha]


def test_a_pull_request_is_graded_but_writes_nothing(repo, api, lesson03):
    base = repo.commit("Base", date=day(-1, 10))
    head = repo.commit("Propuesta", _solved(lesson03), date=day(-1, 11), branch="propuesta")
    event = {"pull_request": {"number": 7, "head": {"sha": head}, "base": {"sha": base}}}
    job, _ = repo.run(head, api, event_name="pull_request", ref="refs/pull/7/merge", event=event)
    skipped = {s.name for s in job.steps if s.outcome == "skipped"}
    assert {
        "Record the grade in the history (grades branch)",
        "Comment on the commit",
        "Show the XP as a commit status",
    } <= skipped
    assert repo.history() == [] and api.all_comments() == [] and api.statuses == []
    assert json.loads((job.artifacts / "autograder-results" / "pr.json").read_text()) == {
        "number": 7,
        "head_sha": head,
    }
    assert "**XP 50/50**" in job.summary


def _comment_runner(repo: LearnerRepo, api: FakeGitHub, artifact: Path, head: str) -> LocalRunner:
    """grade-comment.yml's job, on the base repository's default branch, with the graded run's
    artifact where download-artifact would put it."""
    workspace = repo.checkout(git(repo.work, "rev-parse", "main"))
    temp = repo.tmp / f"runner-comment-{repo.runs}"
    event = {
        "workflow_run": {
            "event": "pull_request",
            "conclusion": "success",
            "head_sha": head,
            "id": 4242,
            "html_url": "https://github.example/learner/curso/actions/runs/4242",
        }
    }
    temp.mkdir()
    (temp / "event.json").write_text(json.dumps(event), encoding="utf-8")
    github = {
        "event_name": "workflow_run",
        "sha": head,
        "ref": "refs/heads/main",
        "ref_name": "main",
        "repository": api.repository,
        "server_url": "https://github.example",
        "api_url": api.url,
        "run_id": "4243",
        "event_path": str(temp / "event.json"),
        "token": api.token,
        "workspace": str(workspace),
        "event": event,
    }

    def download(step, exprs):
        shutil.copytree(artifact, Path(exprs.substitute(step["with"]["path"])))

    return LocalRunner(
        ROOT / ".github" / "workflows" / "grade-comment.yml",
        "comment",
        workspace,
        temp,
        github=github,
        stand_ins={"actions/download-artifact": download},
    )


def test_the_pull_request_comment_is_posted_once_by_the_workflow_run(repo, api, lesson03):
    repo.commit("Base", date=day(-1, 10))
    head = repo.commit("Propuesta", _solved(lesson03), date=day(-1, 11), branch="propuesta")
    event = {"pull_request": {"number": 7, "head": {"sha": head}}}
    graded, _ = repo.run(head, api, event_name="pull_request", ref="refs/pull/7/merge", event=event)
    artifact = graded.artifacts / "autograder-results"
    api.pulls[7] = {"number": 7, "head": {"sha": head}}
    for _ in range(2):  # a second push to the pull request updates the same comment
        job = _comment_runner(repo, api, artifact, head).run()
        assert [s.outcome for s in job.steps if s.kind == "run"] == ["success"], job.steps[-1].stderr
    comments = api.comments_on("issue", "7")
    # The pull request's own run computed it: a practice grade, unverified, never "XP 50/50".
    assert len(comments) == 1 and "Nota de práctica, sin verificar." in comments[0]["body"]
    assert "50/50 XP" in comments[0]["body"] and "XP 50/50" not in comments[0]["body"]
    unverified = "Práctica, sin verificar: el pull request calcula 50/50 XP"
    assert [(s["sha"], s["description"], s["context"]) for s in api.statuses] == [
        (head, unverified, "autograder / práctica (PR)")
    ] * 2


def test_a_forged_pull_request_number_is_refused(repo, api, lesson03, tmp_path):
    repo.commit("Base", date=day(-1, 10))
    head = repo.commit("Propuesta", _solved(lesson03), date=day(-1, 11), branch="propuesta")
    event = {"pull_request": {"number": 7, "head": {"sha": head}}}
    graded, _ = repo.run(head, api, event_name="pull_request", ref="refs/pull/7/merge", event=event)
    forged = tmp_path / "forged"
    shutil.copytree(graded.artifacts / "autograder-results", forged)
    (forged / "pr.json").write_text(json.dumps({"number": 8, "head_sha": head}), encoding="utf-8")
    api.pulls[8] = {"number": 8, "head": {"sha": "f" * 40}}  # someone else's pull request
    job = _comment_runner(repo, api, forged, head).run()
    step = [s for s in job.steps if s.kind == "run"][0]
    assert step.outcome == "failure" and "not the graded commit" in step.stderr
    assert api.all_comments() == [] and api.statuses == []


# --- a learner's repository, made from the release ---------------------------------------------

# What an organization that used the old setup (graders fetched with a token) still holds, until the instructor
# deletes it: the secret and the variable must reach no step of a learner's workflow.
OLD_TOKEN = "ghp_instructorPlantedGradersToken0123456789"
OLD_SECRETS = {"AUTOGRADER_GRADERS_TOKEN": OLD_TOKEN}
OLD_VARIABLES = {"AUTOGRADER_GRADERS_REPO": "instructor/curso-privado"}

# A learner's own engine (autograder/cli.py of their repository, which the workflow installs)
# that copies every grader it can find, and the environment it runs in, into the artifact folder.
STEAL = r"""

def _steal():
    import glob
    import os
    import re
    import shutil
    from pathlib import Path

    out = Path(os.environ.get("OUT") or ".autograder-out") / "stolen"
    out.mkdir(parents=True, exist_ok=True)
    (out / "environ.txt").write_text("\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
    here = Path(__file__).resolve().parent
    places = [os.environ.get("AUTOGRADER_GRADERS"), ".autograder-graders", "autograder/graders",
              str(here / "graders"), os.environ.get("GITHUB_WORKSPACE")]
    for n, place in enumerate(p for p in places if p):
        for name in glob.glob(os.path.join(place, "**", "*"), recursive=True):
            folders = Path(os.path.relpath(name, place)).parts[:-1]
            wanted = name.endswith("reference.py") or any(re.fullmatch(r"lesson\d+", part) for part in folders)
            if os.path.isfile(name) and wanted and ".autograder-out" not in Path(name).parts:
                target = out / str(n) / os.path.relpath(name, place)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(name, target)


_real_main = main


def main(argv=None):
    _steal()
    return _real_main(argv)
"""


@pytest.fixture(scope="module")
def release(course, tmp_path_factory) -> Path:
    from autograder.course.release import build_release

    out = tmp_path_factory.mktemp("release") / "release"
    build_release(course, out)
    return out


def _hidden_grader_files(course) -> dict[bytes, str]:
    """Every graders file that never ships, by content: each lesson's reference.py, official-only
    and quiz checks, and every file of a lesson not on a recording (engine/recording.py)."""
    from autograder.engine import recording

    found = {}
    for lesson in course.lessons:
        folder = ROOT / "autograder" / "graders" / lesson.graders
        ships = (folder / recording.JSON_NAME).is_file()
        for path in folder.rglob("*.py"):
            if not (ships and recording.shipped(path.name)):
                found[path.read_bytes()] = path.relative_to(ROOT).as_posix()
    assert len(found) >= 6 * 2
    return found


def test_a_release_grades_with_practice_and_says_practice_everywhere(tmp_path, api, course, release):
    (tmp_path / "learner").mkdir()
    learner = LearnerRepo(tmp_path / "learner", release=release)
    sha = learner.commit("Primer push", date=day(-1, 10))
    job, workspace = learner.run(sha, api, secrets=OLD_SECRETS, variables=OLD_VARIABLES)
    assert all(s.outcome != "failure" for s in job.steps), [s.stderr[-1500:] for s in job.steps]
    # Nothing is fetched: the steps are the checkout's own, in order, none about hidden graders.
    assert [s.id or s.name for s in job.steps if s.kind == "run"] == [
        "grade",
        "Record the grade in the history (grades branch)",
        "report",
        "Comment on the commit",
        "Show the XP as a commit status",
    ]
    assert not any("graders" in s.name.lower() for s in job.steps)
    assert not (workspace / ".autograder-graders").exists()

    # results.json: a practice grade, every lesson graded with its practice tests
    results = json.loads((job.artifacts / "autograder-results" / "results.json").read_text(encoding="utf-8"))
    assert results["practice"] is True and results["xp_max"] == sum(lesson.xp for lesson in course.lessons)
    assert [lesson["mode"] for lesson in results["lessons"]] == ["practice"] * len(course.lessons)
    # the job summary, a warning annotation and the commit comment
    assert "Nota de práctica" in job.summary
    assert any("nota de práctica" in w for w in job.annotations("warning"))
    assert "Nota de práctica" in api.comments_on("commit", sha)[0]["body"]
    # the commit status: its description and its context
    assert job.step("report").outputs["status_context"] == "autograder / práctica"
    assert [(s["sha"], s["context"], s["description"]) for s in api.statuses] == [
        (sha, "autograder / práctica", f"XP 0/{results['xp_max']} (nota de práctica)")
    ]
    # the grades branch: the record's modes, the badge's label, the README's practice paragraph
    assert {lesson["mode"] for r in learner.history() for lesson in r["lessons"]} == {"practice"}
    badge = json.loads(git(learner.origin, "show", "grades:badge.json"))
    assert badge["label"] == f"{course.name} · práctica" and "práctica" not in badge["message"]
    readme = git(learner.origin, "show", "grades:README.md")
    assert f"## Rama de progreso de {course.name} (práctica)" in readme
    assert f"## {course.name}: progress branch (practice)" in readme
    assert "**Práctica: este repositorio se corrige en práctica" in readme
    assert "**Practice: this repository is graded in practice mode" in readme
    # the organization's old secret reached nothing
    everything = job.summary + job.stdout + "".join(s.stderr for s in job.steps) + json.dumps(api.statuses)
    assert OLD_TOKEN not in everything and "curso-privado" not in everything


def test_a_hostile_engine_finds_no_grader_and_no_secret_to_copy(tmp_path, api, course, release):
    """The attack that ended the graders-in-the-learner's-workflow setup: the learner's own
    autograder/cli.py copies every grader it can find (and its environment) into the artifact
    folder, while the organization still holds the old graders token and variable. The released
    workflow gives it nothing to copy."""
    (tmp_path / "learner").mkdir()
    learner = LearnerRepo(tmp_path / "learner", release=release)
    cli = learner.work / "autograder" / "cli.py"
    sha = learner.commit(
        "Mi motor", {"autograder/cli.py": cli.read_text(encoding="utf-8") + STEAL}, date=day(-1, 10)
    )
    job, _ = learner.run(sha, api, secrets=OLD_SECRETS, variables=OLD_VARIABLES)
    assert all(s.outcome != "failure" for s in job.steps), [s.stderr[-1500:] for s in job.steps]
    artifact = job.artifacts / "autograder-results"
    stolen = artifact / "stolen"
    environ = (stolen / "environ.txt").read_text(encoding="utf-8")  # the hostile engine did run
    assert "GITHUB_WORKSPACE=" in environ
    assert OLD_TOKEN not in environ and "AUTOGRADER_GRADERS" not in environ and "curso-privado" not in environ
    files = [path for path in artifact.rglob("*") if path.is_file()]
    assert not [path for path in files if path.name == "reference.py"]
    hidden = _hidden_grader_files(course)
    assert not [hidden[path.read_bytes()] for path in files if path.read_bytes() in hidden]
    assert json.loads((artifact / "results.json").read_text(encoding="utf-8"))["practice"] is True


def test_the_hostile_engine_would_copy_graders_if_it_could_reach_any(tmp_path, course):
    """The test above is not vacuous: the same copying code, given the graders the old workflow
    handed over (AUTOGRADER_GRADERS), copies every reference.py and every grader file."""
    import os
    import sys

    out = tmp_path / "out"
    code = "import sys\nmain = lambda argv=None: 0\n" + STEAL + "\nsys.exit(main())\n"
    env = {**os.environ, "OUT": str(out), "AUTOGRADER_GRADERS": str(ROOT / "autograder" / "graders")}
    env.pop("GITHUB_WORKSPACE", None)
    script = tmp_path / "autograder_cli.py"
    script.write_text(code, encoding="utf-8")
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True, timeout=60)
    files = [path for path in (out / "stolen").rglob("*") if path.is_file()]
    assert {path.parent.name for path in files if path.name == "reference.py"} >= {
        lesson.graders for lesson in course.lessons
    }
    hidden = _hidden_grader_files(course)
    assert set(hidden.values()) <= {
        hidden[path.read_bytes()] for path in files if path.read_bytes() in hidden
    }
