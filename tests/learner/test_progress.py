"""`autograder progress`: the local history merged with the `grades` branch of a real git
repository whose origin is a real bare repository, written by the workflow's own code."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from support.learner_course import ANSI, Terminal, cli_env, make_course, run_cli
from support.project import ROOT

from autograder.core.history import LessonEntry, Record
from autograder.core.manifest import load_course
from autograder.github.grades_branch import append_record
from autograder.learner.progress import gather, render_progress
from autograder.learner.store import LocalStore

COURSE = load_course(ROOT / "course.yml")
XP_MAX = sum(lesson.xp for lesson in COURSE.lessons)
# The line under the XP: the learner's history and grades branch are theirs to write, so they say práctica.
PRACTICE_ES = (
    "XP de práctica: sale de tu historial local y de la rama grades de tu repositorio, que orientan "
    "pero no son una nota; la nota oficial la calcula tu profesor (grade-all)."
)
PRACTICE_EN = (
    "Practice XP: it comes from your local history and your repository's grades branch, which are a "
    "guide, never a grade; the official grade is computed by your instructor (grade-all)."
)


def git(cwd, *args) -> str:
    env = cli_env(
        GIT_AUTHOR_NAME="Ana",
        GIT_AUTHOR_EMAIL="ana@example.org",
        GIT_COMMITTER_NAME="Ana",
        GIT_COMMITTER_EMAIL="ana@example.org",
    )
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def entry(lesson_id: str, score: float, completed: bool = False, mode: str = "hidden") -> LessonEntry:
    return LessonEntry(lesson_id, score, 100, completed, 50 if completed else 0, 50, mode)


def record(when: datetime, *entries: LessonEntry, commit: str | None = None) -> Record:
    commit = commit or hashlib.sha1(f"{when.isoformat()}{entries}".encode()).hexdigest()
    return Record(commit, when, when, sum(e.xp for e in entries), sum(e.xp_max for e in entries), entries)


def days_ago(days: int) -> datetime:
    """Noon, `days` days ago, in the course's time zone (never near a day boundary)."""
    zone = ZoneInfo(COURSE.timezone)
    today = datetime.now(zone).replace(hour=12, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days)


def rows(output: str) -> dict[str, list[str]]:
    """The table's rows by lesson id: cells are separated by two or more spaces."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"(\d\d) · ", line)
        if match:
            found[match.group(1)] = re.split(r"\s{2,}", line.strip())
    return found


def test_progress_with_nothing_graded_yet(tmp_path):
    root = make_course(tmp_path / "course", {"01": "stub"})
    proc = run_cli(root, "progress", "--fetch")  # not a git repository: the fetch only warns
    assert proc.returncode == 0, proc.stderr
    assert not ANSI.search(proc.stdout)
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["Transformers desde cero · tu progreso", f"XP 0/{XP_MAX} · sin racha"]
    assert lines[2] == PRACTICE_ES  # one line, whatever was graded: this XP is never a grade
    table = rows(proc.stdout)
    assert list(table) == [lesson.id for lesson in COURSE.lessons]
    assert table["01"] == ["01 · Tokens y lotes", "░" * 20 + " 0%", "—", "0/50", "sin empezar"]
    assert "Aún no hay ninguna corrección. Empieza con: autograder check 01" in lines
    assert lines[-1].startswith("ninguna corrección en tu historial local · sin rama grades")
    assert "Aviso: no se pudo traer la rama grades de origin" in proc.stderr


def test_progress_merges_the_local_history_and_the_grades_branch(tmp_path):
    # The learner's repository, pushed to a bare remote.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    root = make_course(tmp_path / "learner", {"01": "stub", "02": "stub"})
    git(root, "init", "--quiet", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "--quiet", "-m", "start")
    git(root, "remote", "add", "origin", str(remote))
    git(root, "push", "--quiet", "origin", "main")
    sha = git(root, "rev-parse", "HEAD")

    # The grading workflow, in its own clone, records yesterday's push on the grades branch.
    runner = tmp_path / "runner"
    git(tmp_path, "clone", "--quiet", str(remote), str(runner))
    pushed = record(days_ago(1), entry("01", 100, completed=True), entry("02", 60), commit=sha)
    append_record(runner, pushed, tz=COURSE.timezone, lang="es", course=COURSE.name)

    # Today the learner checked locally: more of lesson 02, and lesson 03 begun.
    LocalStore(root).append(record(days_ago(0), entry("02", 80), entry("03", 20)))

    before = run_cli(root, "progress")
    assert before.returncode == 0, before.stderr
    assert before.stdout.splitlines()[1] == f"XP 0/{XP_MAX} · racha de 1 día"
    assert "sin rama grades" in before.stdout

    after = run_cli(root, "progress", "--fetch")
    assert after.returncode == 0, after.stderr
    lines = after.stdout.splitlines()
    assert lines[1] == f"XP 50/{XP_MAX} · racha de 2 días"
    assert lines[2] == PRACTICE_ES  # the grades branch's XP is practice XP too, even graded "hidden"
    table = rows(after.stdout)
    assert table["01"] == ["01 · Tokens y lotes", "█" * 20 + " 100%", "100/100", "50/50", "completada"]
    assert table["02"] == [
        "02 · Embeddings y el modelo bigrama",
        "█" * 16 + "░" * 4 + " 80%",
        "80/100",
        "0/50",
        "en curso",
    ]
    assert table["03"][1:] == ["████" + "░" * 16 + " 20%", "20/100", "0/50", "en curso"]
    assert table["04"][1:] == ["░" * 20 + " 0%", "—", "0/50", "sin empezar"]
    assert lines[-1] == (
        "1 corrección en tu historial local (.autograder/history.jsonl) · "
        "1 commit corregido en la rama origin/grades"
    )

    # Fetched once, the branch is read offline from then on; in English too.
    offline = run_cli(root, "progress", "--lang", "en")
    assert offline.stdout.splitlines()[1:3] == [f"XP 50/{XP_MAX} · 2-day streak", PRACTICE_EN]
    assert rows(offline.stdout)["01"][-1] == "completed"


def test_xp_kept_when_failing_now_practice_and_damaged_lines(tmp_path):
    root = make_course(tmp_path / "course", {"02": "stub"})
    store = LocalStore(root)
    store.append(record(days_ago(3), entry("02", 100, completed=True, mode="practice")))
    with open(store.history, "a", encoding="utf-8") as fh:
        fh.write('{"v": 1, "commit": "not a commit"}\n')
    store.append(record(days_ago(0), entry("02", 75, mode="practice")))

    proc = run_cli(root, "progress")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # Earned three days ago and kept; no progress since (a lower score), so no streak now.
    assert lines[1] == f"XP 50/{XP_MAX} · sin racha · mejor racha: 1"
    assert rows(proc.stdout)["02"][1:] == [
        "█" * 15 + "░" * 5 + " 75%",
        "75/100",
        "50/50",
        "XP ganada; ahora falla (nota de práctica)",
    ]
    assert re.search(
        r"Aviso: \.autograder/history\.jsonl: se ignora una línea dañada \(line 2: ", proc.stderr
    )
    assert "2 correcciones en tu historial local" in lines[-1]


def test_colour_in_a_terminal_and_plain_otherwise(tmp_path):
    root = make_course(tmp_path / "course", {"01": "stub"})
    LocalStore(root).append(record(days_ago(0), entry("01", 40)))
    gathered = gather(load_course(root / "course.yml"), LocalStore(root), fetch=False)
    plain = render_progress(COURSE, gathered, "es", color=False)
    coloured = render_progress(COURSE, gathered, "es", color=True)
    assert not ANSI.search(plain) and ANSI.search(coloured)
    assert ANSI.sub("", coloured).count("01 · Tokens y lotes") == 1

    term = Terminal(
        [sys.executable, "-m", "autograder", "--course", str(root / "course.yml"), "progress"],
        cwd=root,
        env=cli_env(TERM="xterm-256color"),
    )
    try:
        assert term.wait(60) == 0
        assert "\x1b[" in term.raw.decode("utf-8", "replace"), "a terminal gets colour"
        assert "40/100" in term.text
    finally:
        term.close()
