"""The grading workflow's steps after `autograder grade` (see .github/workflows/grade.yml).

    autograder ci record --results FILE          one record on the `grades` branch (pushes only)
    autograder ci report --results FILE --out DIR  job summary, annotations, comment, outputs

In a learner's repository the grade is a practice grade (no hidden graders there), and each
channel these steps feed says so: the summary and the comment (the practice note), a warning
annotation, the status title and the status context (the `status_context` output,
PRACTICE_STATUS_CONTEXT), and the record on the `grades` branch (its lessons' mode "practice").

Both read what GitHub Actions provides (GITHUB_SHA, GITHUB_REPOSITORY, GITHUB_EVENT_NAME,
GITHUB_EVENT_PATH, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, GITHUB_SERVER_URL, GITHUB_RUN_ID) and
the results.json written by `autograder grade --format json`; the grade itself is never
recomputed here. Neither step fails the job over the history: a learner whose grade could not
be recorded (a token without write access, a network hiccup) still gets all the feedback, with
a warning that says so.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from autograder.core import neutral
from autograder.core.locate import locate
from autograder.core.manifest import Course, ManifestError
from autograder.github import actions as github

_SHA = re.compile(r"[0-9a-f]{40}")
# GitHub shows at most 10 error annotations per step; the summary has the rest.
MAX_ANNOTATIONS = 10
ANNOTATION_CHARS = 600
# The commit status's context names the kind of grade, so that a practice grade can never be
# read as (or satisfy a branch protection rule that requires) the status of a hidden-graders
# grade. A pull request's unverified grade has a third context of its own (api.PR_STATUS_CONTEXT).
STATUS_CONTEXT = "autograder / XP"
PRACTICE_STATUS_CONTEXT = "autograder / práctica"


class CIError(Exception):
    """A missing or malformed input of a CI step (a developer's error, exit 2)."""


# --- inputs ----------------------------------------------------------------------------------


def load_results(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CIError(f"{path}: no results file; did `autograder grade --format json --output {path}` run?")
    except json.JSONDecodeError as exc:
        raise CIError(f"{path}: not JSON ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("lessons"), list):
        raise CIError(f"{path}: not a results.json of this autograder")
    return data


def graded_commit(env=os.environ) -> str:
    sha = env.get("GITHUB_SHA", "")
    if not _SHA.fullmatch(sha):
        raise CIError(f"GITHUB_SHA must be a 40-hex commit id, got {sha[:60]!r}")
    return sha


def run_url(env=os.environ) -> str | None:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if not (server and repo and run):
        return None
    return f"{server}/{repo}/actions/runs/{run}"


def _event(env=os.environ) -> dict:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _record(data: dict, repo: Path, env=os.environ):
    from autograder.core.history import Record
    from autograder.github.grades_branch import commit_time

    sha = graded_commit(env)
    return Record.from_results(
        data, commit=sha, committed_at=commit_time(repo, sha), graded_at=datetime.now(timezone.utc)
    )


# --- record ----------------------------------------------------------------------------------


def record(course: Course, results: Path, repo: Path, env=os.environ, out=sys.stdout) -> int:
    """Append this grading to the history on the `grades` branch (idempotent per commit)."""
    from autograder.github.grades_branch import GitStoreError, append_record

    data = load_results(results)
    lang = data.get("language", course.language)
    rec = _record(data, repo, env)
    try:
        outcome = append_record(repo, rec, tz=course.timezone, lang=lang, course=course.name)
    except GitStoreError as exc:
        _history_warning(out, "ci.history_not_recorded", lang, exc)
        return 0
    for problem in outcome.problems:
        _history_warning(out, "ci.history_line_skipped", lang, problem)
    state = "recorded" if outcome.added else "already recorded (same commit)"
    out.write(
        f"autograder: commit {rec.commit[:12]} {state}; XP {outcome.progress.xp}/{outcome.progress.xp_max}, "
        f"streak {outcome.progress.streak}\n"
    )
    return 0


# --- report ----------------------------------------------------------------------------------


def report(course: Course, results: Path, out_dir: Path, repo: Path, env=os.environ, out=sys.stdout) -> int:
    """Job summary, annotations, the comment body, and step outputs, from one results.json."""
    from autograder.core.history import compute_progress
    from autograder.core.i18n import translate
    from autograder.github.grades_branch import GitStoreError, read_history
    from autograder.render.output import from_json_dict, render_markdown

    data = load_results(results)
    try:
        result = from_json_dict(data)
    except ValueError as exc:
        raise CIError(f"{results}: {exc}")
    lang = result.language
    rec = _record(data, repo, env)
    try:
        records, problems = read_history(repo)
    except GitStoreError as exc:
        records, problems = [], []
        _history_warning(out, "ci.history_unreadable", lang, exc)
    progress = compute_progress(records, course.timezone, current=rec)
    url = run_url(env)

    github.append_summary(render_markdown(result, lang, progress=progress, run_url=url), env)
    for line in annotations(course, result, lang, repo):
        out.write(line + "\n")
    for problem in problems:
        _history_warning(out, "ci.history_line_skipped", lang, problem)
    if result.practice:
        out.write(
            github.annotation(
                "warning",
                translate("render.practice_note", lang),
                title=translate("render.practice_tag", lang),
            )
            + "\n"
        )

    out_dir.mkdir(parents=True, exist_ok=True)
    comment = render_markdown(result, lang, progress=progress, run_url=url, compact=True)
    (out_dir / "comment.md").write_text(comment, encoding="utf-8")
    title = f"XP {progress.xp}/{progress.xp_max}"
    if result.practice:
        title += f" ({translate('render.practice_tag', lang)})"
    pull = _event(env).get("pull_request") or {}
    number, head = pull.get("number"), (pull.get("head") or {}).get("sha")
    if env.get("GITHUB_EVENT_NAME") == "pull_request" and isinstance(number, int):
        # For grade-comment.yml, which re-checks it against the pull request's real head
        # (GITHUB_SHA is the merge commit a pull request is graded on; statuses go on the head).
        # It reads results.json beside it as untrusted data and says its grade is unverified:
        # this run's comment.md and outputs could be anything the pull request wanted.
        (out_dir / "pr.json").write_text(
            json.dumps({"number": number, "head_sha": head}) + "\n", encoding="utf-8"
        )
    outputs = {
        "title": title,
        "xp": str(progress.xp),
        "xp_max": str(progress.xp_max),
        "streak": str(progress.streak),
        "practice": str(result.practice).lower(),
        "status_context": PRACTICE_STATUS_CONTEXT if result.practice else STATUS_CONTEXT,
        "run_url": url or "",
    }
    for name, value in outputs.items():
        github.set_output(name, value, env)
    out.write(f"autograder: {title}\n")
    return 0


def _history_warning(out, key: str, lang: str, detail: object) -> None:
    """A warning annotation about the learner's history, in their language."""
    from autograder.core.i18n import translate

    text = translate(key, lang, detail=str(detail)[:ANNOTATION_CHARS])
    out.write(github.annotation("warning", text, title=translate("ci.history_title", lang)) + "\n")


def annotations(course: Course, result, lang: str, repo: Path) -> list[str]:
    """One error annotation per failed TODO (first failed check of it), on the TODO's line."""
    from autograder.core import i18n
    from autograder.core.results import Status
    from autograder.engine import learner_errors

    lines: list[str] = []
    seen: set[tuple[str, str | None]] = set()
    for lesson_result in result.lessons:
        try:
            lesson = course.lesson(lesson_result.id)
        except ManifestError:  # a results.json from another course.yml: nothing to point at
            continue
        for check in lesson_result.checks:
            if check.status not in (Status.FAILED, Status.ERROR):
                continue
            broken = learner_errors.of(check)
            if broken is not None:  # a file that does not load: one annotation, on its line
                if ("load", broken.where()) in seen or len(lines) == MAX_ANNOTATIONS:
                    continue
                seen.add(("load", broken.where()))
                text = " ".join(neutral.terminal(i18n.feedback_text(check.feedback, lang)).split())
                title = f"{lesson.id} · {broken.path}"
                lines.append(
                    github.annotation(
                        "error", text[:ANNOTATION_CHARS], file=broken.path, line=broken.line, title=title
                    )
                )
                continue
            key = (lesson.id, check.todo or check.id)
            if key in seen:
                continue
            seen.add(key)
            if len(lines) == MAX_ANNOTATIONS:
                return lines
            raised = check.raised_in
            if raised is not None and raised.line > 0 and raised.file in lesson.files:
                # The learner's code raised: the annotation sits on the line that raised.
                file, line = (Path("exercises") / lesson.folder / raised.file).as_posix(), raised.line
            else:
                file, line = locate(lesson, check.todo, check.id, repo)
            # Learner text (shown in the job's log too): no escape sequence, one line.
            text = " ".join(neutral.terminal(i18n.feedback_text(check.feedback, lang)).split())[
                :ANNOTATION_CHARS
            ]
            title = f"{lesson.id} · {check.id}" + (f" · TODO [{check.todo}]" if check.todo else "")
            # An informational check (own-pieces) never costs points: a warning, not an error.
            level = "warning" if check.informational else "error"
            lines.append(github.annotation(level, text or title, file=file, line=line, title=title))
    return lines


# --- command line ----------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    ci = sub.add_parser("ci", help=message("cli.ci.help"), description=message("cli.ci.description"))
    steps = ci.add_subparsers(
        dest="step", required=True, metavar=message("cli.ci.step_metavar"), help=message("cli.ci.step_help")
    )
    rec = steps.add_parser(
        "record", help=message("cli.ci.record.help"), description=message("cli.ci.record.description")
    )
    rec.add_argument(
        "--results",
        type=Path,
        required=True,
        metavar=message("cli.metavar.file"),
        help=message("cli.ci.results"),
    )
    rep = steps.add_parser(
        "report", help=message("cli.ci.report.help"), description=message("cli.ci.report.description")
    )
    rep.add_argument(
        "--results",
        type=Path,
        required=True,
        metavar=message("cli.metavar.file"),
        help=message("cli.ci.results"),
    )
    rep.add_argument(
        "--out", type=Path, required=True, metavar=message("cli.metavar.dir"), help=message("cli.ci.out")
    )


def main(course: Course, args) -> int:
    repo = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())
    try:
        if args.step == "record":
            return record(course, args.results, repo)
        return report(course, args.results, args.out, repo)
    except CIError as exc:
        print(f"autograder ci {args.step}: {exc}", file=sys.stderr)
        return 2
