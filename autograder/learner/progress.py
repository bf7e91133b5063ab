"""`autograder progress`: XP, streak and a per-lesson table, from everything ever graded.

    autograder progress [--fetch] [--lang es|en]

Two sources, merged with the history rules of autograder/core/history.py (XP kept once earned, a
streak of consecutive days with progress in the course's time zone):
  - the local history, .autograder/history.jsonl, written by `check` and `watch`;
  - the `grades` branch written by the grading workflow on each push, read with git from the
    refs this clone has (origin/grades, a local `grades` branch, or the private ref the
    workflow's own step keeps). Nothing is fetched unless --fetch asks for it, so the command
    works offline and never waits for a network.
Each lesson's row shows its most recent grading from either source (points and a bar), the XP
earned and its state. Output is a rich table in a terminal and plain, stable text otherwise.
Both sources are written on the learner's side (their machine, their repository's workflow), so
the XP shown is practice XP, never a grade, and one line under it says so; the official grade
comes from the instructor's `grade-all`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core import git, i18n
from autograder.core.manifest import Course
from autograder.learner.store import HISTORY_FILE, STATE_DIR, LocalStore
from autograder.learner.terminal import bar, streak_text, t, terminal_width

REMOTE = "origin"
BRANCH = "grades"
HISTORY = "history.jsonl"  # the file on the branch (autograder/github/grades_branch.py)
# Where a clone may hold the branch: fetched, checked out, or the workflow step's private ref.
BRANCH_REFS = (f"refs/remotes/{REMOTE}/{BRANCH}", f"refs/heads/{BRANCH}", f"refs/autograder/{BRANCH}")
LOCAL_HISTORY = f"{STATE_DIR}/{HISTORY_FILE}"
GIT_TIMEOUT = 20
FETCH_TIMEOUT = 60


@dataclass
class Gathered:
    """Everything `progress` knows: the records of each source and what they add up to."""

    local: list = field(default_factory=list)
    branch: list = field(default_factory=list)
    branch_ref: str | None = None  # the ref read, as the learner names it (origin/grades)
    problems: list[str] = field(default_factory=list)  # already phrased for the learner
    progress: object = None  # autograder.core.history.Progress over both sources
    latest: dict = field(default_factory=dict)  # lesson id -> its most recent LessonEntry
    fetched: str | None = None  # what --fetch found (see fetch_branch); None: not asked to fetch


def _git(root: Path, *args: str, timeout: float = GIT_TIMEOUT) -> subprocess.CompletedProcess[bytes] | None:
    """git in the course's repository (autograder.core.git); None when git is not installed or
    does not answer: the learner then has no branch to read, not an error."""
    try:
        return git.run(root, *args, check=False, timeout=timeout)
    except git.GitError:
        return None


# What a --fetch found (Gathered.fetched): the branch came, the remote has none yet, or it failed.
FETCHED, NOT_ON_REMOTE, FETCH_FAILED = "fetched", "not_on_remote", "failed"


def fetch_branch(root: Path, lang: str, warn) -> str:
    """Bring the remote `grades` branch into origin/grades; a failure only warns. Returns
    FETCHED, NOT_ON_REMOTE or FETCH_FAILED."""
    listing = _git(root, "ls-remote", "--heads", REMOTE, f"refs/heads/{BRANCH}", timeout=FETCH_TIMEOUT)
    if listing is None or listing.returncode != 0:
        detail = listing.stderr.decode("utf-8", "replace").strip() if listing is not None else "git"
        warn(t("progress_fetch_failed", lang, branch=BRANCH, remote=REMOTE, detail=_last_line(detail)))
        return FETCH_FAILED
    if not listing.stdout.strip():
        return NOT_ON_REMOTE  # no grades branch yet: nothing to fetch, nothing wrong
    proc = _git(
        root,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        REMOTE,
        f"+refs/heads/{BRANCH}:refs/remotes/{REMOTE}/{BRANCH}",
        timeout=FETCH_TIMEOUT,
    )
    if proc is None or proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip() if proc is not None else "git"
        warn(t("progress_fetch_failed", lang, branch=BRANCH, remote=REMOTE, detail=_last_line(detail)))
        return FETCH_FAILED
    return FETCHED


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "?")[:200]


def branch_records(root: Path, lang: str) -> tuple[list, str | None, list[str]]:
    """The records on every ref of the branch this clone holds (deduplicated by commit), the
    first ref found, and the problems of damaged lines."""
    from autograder.core.history import parse_history

    records, seen, problems, shown = [], set(), [], None
    for ref in BRANCH_REFS:
        proc = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if proc is None or proc.returncode != 0:
            continue
        name = ref.removeprefix("refs/remotes/").removeprefix("refs/heads/")
        shown = shown or name
        blob = _git(root, "cat-file", "blob", f"{ref}:{HISTORY}")
        if blob is None or blob.returncode != 0:
            continue
        found, bad = parse_history(blob.stdout)
        problems += [t("progress_history_problem", lang, source=f"{name}:{HISTORY}", detail=p) for p in bad]
        for record in found:
            if record.commit not in seen:
                seen.add(record.commit)
                records.append(record)
    return records, shown, problems


def gather(course: Course, store: LocalStore, *, fetch: bool, lang: str | None = None) -> Gathered:
    from autograder.core.history import compute_progress

    lang = lang or course.language
    out = Gathered()
    if fetch:
        out.fetched = fetch_branch(course.root, lang, store.warn)
    out.local, bad = store.records()
    out.problems += [t("progress_history_problem", lang, source=LOCAL_HISTORY, detail=p) for p in bad]
    out.branch, out.branch_ref, branch_problems = branch_records(course.root, lang)
    out.problems += branch_problems
    merged = {record.commit: record for record in [*out.branch, *out.local]}
    ordered = sorted(merged.values(), key=lambda r: (r.committed_at, r.graded_at))
    out.progress = compute_progress(ordered, course.timezone)
    for record in ordered:
        for entry in record.lessons:
            out.latest[entry.id] = entry
    return out


def earned_lessons(progress) -> set[str]:
    """The lessons whose XP the learner has earned (history.Progress; kept after a regression)."""
    return {lp.id for lp in progress.lessons if lp.earned} if progress is not None else set()


def completed_lessons(latest: dict) -> set[str]:
    """The lessons whose latest grading (Gathered.latest) completed them."""
    return {lesson_id for lesson_id, entry in latest.items() if entry.completed}


def course_xp_max(course: Course) -> int:
    return sum(lesson.xp for lesson in course.lessons)


# --- rendering ---------------------------------------------------------------------------------


def _state(lesson_progress, latest) -> tuple[str, str]:
    """(catalog key, style) of a lesson's state."""
    if latest is None:
        return "progress_state_new", "dim"
    if latest.completed:
        return "progress_state_done", "green"
    if lesson_progress is not None and lesson_progress.earned:
        return "progress_state_failing", "yellow"
    return "progress_state_doing", "yellow"


def render_progress(course: Course, gathered: Gathered, lang: str, *, color: bool, width: int = 100) -> str:
    from rich import box
    from rich.table import Table
    from rich.text import Text as RichText

    from autograder.render.labels import score_number
    from autograder.render.output import make_console, printed

    console, buffer = make_console(color, width)
    progress = gathered.progress
    console.print(RichText(t("progress_title", lang, course=course.name), style="bold"))
    headline = [
        t("progress_xp", lang, xp=progress.xp, xp_max=course_xp_max(course)),
        streak_text(progress.streak, lang),
    ]
    if progress.longest_streak > progress.streak:
        headline.append(t("progress_best_streak", lang, days=progress.longest_streak))
    console.print(" · ".join(headline))
    console.print(RichText(i18n.translate("progress.xp_is_practice", lang), style="dim"), soft_wrap=True)
    console.print()

    table = Table(
        box=box.SIMPLE_HEAD if color else None,
        show_edge=False,
        pad_edge=False,
        header_style="bold" if color else None,
    )
    for key, justify in (
        ("lesson", "left"),
        ("progress", "left"),
        ("points", "right"),
        ("xp", "right"),
        ("status", "left"),
    ):
        table.add_column(t(f"progress_col_{key}", lang), justify=justify, no_wrap=key != "lesson")
    by_id = {lp.id: lp for lp in progress.lessons}
    for lesson in course.lessons:
        latest, earned = gathered.latest.get(lesson.id), by_id.get(lesson.id)
        key, style = _state(earned, latest)
        label = t(key, lang)
        if earned is not None and earned.practice:
            label += " " + t("progress_practice_tag", lang)
        fraction = latest.score / latest.max_score if latest is not None and latest.max_score else 0.0
        cells = [
            RichText(f"{lesson.id} · {i18n.localize(lesson.title, lang)}"),
            RichText(f"{bar(fraction)} {round(fraction * 100)}%", style=style),
            RichText(
                f"{score_number(latest.score)}/{score_number(latest.max_score)}"
                if latest is not None
                else "—"
            ),
            RichText(f"{lesson.xp if earned is not None and earned.earned else 0}/{lesson.xp}"),
            RichText(label, style=style),
        ]
        table.add_row(*cells)
    console.print(table)
    console.print()

    if not gathered.local and not gathered.branch:
        first = course.lessons[0].id if course.lessons else "01"
        console.print(RichText(t("progress_empty", lang, lesson=first), style="cyan"), soft_wrap=True)
    local = (
        t(_counted("progress_local", len(gathered.local)), lang, n=len(gathered.local), path=LOCAL_HISTORY)
        if gathered.local
        else t("progress_local_none", lang)
    )
    branch = (
        t(
            _counted("progress_branch", len(gathered.branch)),
            lang,
            n=len(gathered.branch),
            ref=gathered.branch_ref,
        )
        if gathered.branch_ref
        else _no_branch(gathered.fetched, lang)
    )
    console.print(RichText(f"{local} · {branch}", style="dim"), soft_wrap=True)
    return printed(buffer)


def _no_branch(fetched: str | None, lang: str) -> str:
    """Why there is no grades branch to read, and what to do: --fetch only if not tried yet."""
    if fetched is None:
        return t("progress_branch_none", lang)
    if fetched == FETCH_FAILED:  # the warning above says why
        return t("progress_branch_none_fetch_failed", lang, remote=REMOTE)
    return t("progress_branch_none_on_remote", lang, remote=REMOTE)


def _counted(key: str, n: int) -> str:
    return key + "_one" if n == 1 else key


# --- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = sub.add_parser(
        "progress",
        help=message("cli.progress.help"),
        description=message("cli.progress.description", branch=BRANCH),
    )
    parser.add_argument(
        "--fetch", action="store_true", help=message("cli.progress.fetch", branch=BRANCH, remote=REMOTE)
    )
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))


def main(course: Course, args) -> int:
    from autograder.render.output import use_color

    lang = args.lang or course.language
    store = LocalStore(course.root)
    gathered = gather(course, store, fetch=args.fetch, lang=lang)
    for problem in gathered.problems:
        print(problem, file=sys.stderr)
    color = use_color(sys.stdout)
    sys.stdout.write(
        render_progress(course, gathered, lang, color=color, width=terminal_width(sys.stdout)).rstrip("\n")
        + "\n"
    )
    return 0
