"""The command line a workflow step runs from a bare checkout, standard library only.

    python -m autograder.github.api comment --kind commit|issue --target X --body-file F [--marker M]
    python -m autograder.github.api status --sha S --state success --description D --context C [--target-url U]
    python -m autograder.github.api pr-comment --graded-dir D --head-sha S [--run-url U]

It runs without the project's dependencies, so it imports nothing outside the standard library
but its siblings rest.py and texts.py (autograder/__init__.py is stdlib only) and
autograder/core/neutral.py, and it never runs a shell: learner text only ever travels in JSON
bodies.

A pull request's grade (`pr-comment`, run by grade-comment.yml) comes from an artifact of the
pull request's own run, which the pull request could have changed: it is read as data only
(results.json), rendered here with every text made inert (autograder/core/neutral.py), and said to
be a practice grade, unverified, in the comment and in the status; never "XP n/m" as a grade.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Mapping

from autograder.core import neutral
from autograder.github.rest import (
    DEFAULT_MARKER,
    STATUS_STATES,
    GitHubAPI,
    GitHubError,
    validate_marker,
    validate_number,
    validate_sha,
)
from autograder.github.texts import DEFAULT_LANGUAGE, LANGUAGES, catalog_messages


class _UsageError(Exception):
    pass


# Not the context of the verified "XP n/m" status grade.yml sets on a push: a pull request's
# own run can never overwrite it, nor satisfy a branch protection rule that requires it.
PR_STATUS_CONTEXT = "autograder / práctica (PR)"
# Bounds on what is read from a pull request's artifact (untrusted, possibly huge).
MAX_ARTIFACT_FILE = 1 << 20
MAX_RESULTS_FILE = 16 << 20
MAX_LESSONS = 100
MAX_FAILING_NAMED = 8
_NOT_FAILING = ("passed", "skipped")


def _read_artifact_file(folder: Path, name: str, limit: int = MAX_ARTIFACT_FILE) -> str:
    path = folder / name
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"the graded artifact has no {name}")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the graded artifact's {name} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")


def _read_graded_dir(folder: Path) -> tuple[int, dict]:
    """pr.json's number and results.json, validated as data (comment.md and status.json, which
    the pull request's run wrote as it pleased, are not used)."""
    try:
        pr = json.loads(_read_artifact_file(folder, "pr.json"))
        results = json.loads(_read_artifact_file(folder, "results.json", MAX_RESULTS_FILE))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the graded artifact is not valid JSON: {exc}") from None
    if not isinstance(pr, dict) or not isinstance(results, dict):
        raise ValueError("the graded artifact's pr.json and results.json must be JSON objects")
    return validate_number(pr.get("number")), results


def _amount(value: Any, what: str) -> int | float:
    """A points or XP value of an untrusted results.json: a finite number in [0, 10^6]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1_000_000:
        raise ValueError(f"the graded artifact's results.json: {what} is not a number of points")
    return int(value) if float(value).is_integer() else round(float(value), 2)


def _field(data: Any, key: str, kind: type, what: str) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ValueError(
            f"the graded artifact's results.json: {what}.{key} is missing or not a {kind.__name__}"
        )
    return value


def unverified_report(results: dict, lang: str, run_url: str | None = None) -> tuple[str, str]:
    """(comment body, status description) for a pull request's results.json: a practice grade,
    unverified, said first; every value read as untrusted data (numbers checked, texts inert)."""
    lang = results.get("language") if results.get("language") in LANGUAGES else lang

    def t(key: str, **params: Any) -> str:
        template = catalog_messages(lang, "ci").get(key) or key
        return template.format(**params)

    xp, xp_max = _amount(results.get("xp"), "xp"), _amount(results.get("xp_max"), "xp_max")
    lessons = _field(results, "lessons", list, "results")
    if len(lessons) > MAX_LESSONS:
        raise ValueError(f"the graded artifact's results.json has more than {MAX_LESSONS} lessons")
    out = [
        "> [!WARNING]",
        f"> **{neutral.markdown_inline(t('ci.pr_title'))}** {neutral.markdown_inline(t('ci.pr_note'))}",
        "",
        neutral.markdown_inline(
            t(
                "ci.pr_totals",
                xp=xp,
                xp_max=xp_max,
                score=_amount(results.get("score"), "score"),
                max_score=_amount(results.get("max_score"), "max_score"),
            )
        ),
        "",
        "| " + " | ".join(t(f"ci.pr_col_{c}") for c in ("lesson", "status", "points", "xp")) + " |",
        "|---|---|---:|---:|",
    ]
    failing = []
    for lesson in lessons:
        name = f"{_field(lesson, 'id', str, 'lesson')} · {_field(lesson, 'title', str, 'lesson')}"
        done = _field(lesson, "completed", bool, "lesson")
        state = f"✅ {t('ci.pr_completed')}" if done else f"❌ {t('ci.pr_not_completed')}"
        points = f"{_amount(lesson.get('score'), 'score')}/{_amount(lesson.get('max_score'), 'max_score')}"
        gained = f"{_amount(lesson.get('xp'), 'xp')}/{_amount(lesson.get('xp_max'), 'xp_max')}"
        out.append(
            "| " + " | ".join(neutral.markdown_inline(cell) for cell in (name, state, points, gained)) + " |"
        )
        checks = _field(lesson, "checks", list, "lesson")
        bad = [
            _field(c, "id", str, "check")
            for c in checks
            if _field(c, "status", str, "check") not in _NOT_FAILING
        ]
        if bad and not done:
            named = ", ".join(neutral.markdown_code(check) for check in bad[:MAX_FAILING_NAMED])
            if len(bad) > MAX_FAILING_NAMED:
                named += " " + neutral.markdown_inline(t("ci.pr_more", n=len(bad) - MAX_FAILING_NAMED))
            failing.append(
                f"- **{neutral.markdown_inline(name)}**: {neutral.markdown_inline(t('ci.pr_failing'))} {named}"
            )
    if failing:
        out += ["", *failing]
    if run_url:
        out += ["", f"[{neutral.markdown_inline(t('ci.pr_run_link'))}]({run_url})"]
    return "\n".join(out) + "\n", t("ci.pr_status", xp=xp, xp_max=xp_max)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.github.api",
        description="Post the autograder's feedback to GitHub (token from $GITHUB_TOKEN or $GH_TOKEN, "
        "API from $GITHUB_API_URL, repository from $GITHUB_REPOSITORY).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    comment = sub.add_parser("comment", help="create or update the autograder's comment")
    comment.add_argument("--kind", choices=("commit", "issue"), required=True)
    comment.add_argument(
        "--target", required=True, help="a commit SHA (commit) or a pull request number (issue)"
    )
    comment.add_argument("--body-file", required=True, type=Path, help="Markdown file with the comment")
    comment.add_argument("--marker", default=DEFAULT_MARKER, help=f"hidden marker (default {DEFAULT_MARKER})")
    comment.add_argument("--lang", choices=LANGUAGES, default=DEFAULT_LANGUAGE, help="language of notes")
    pr = sub.add_parser(
        "pr-comment",
        help="from a graded pull request's artifact (grade-comment.yml): "
        "comment on the pull request and set the XP status on its head",
    )
    pr.add_argument(
        "--graded-dir",
        required=True,
        type=Path,
        help="the downloaded artifact: pr.json and results.json (untrusted data)",
    )
    pr.add_argument(
        "--head-sha", required=True, help="the graded commit, from the workflow_run event (trusted)"
    )
    pr.add_argument("--run-url", default=None, help="link for the status (the graded run)")
    pr.add_argument("--lang", choices=LANGUAGES, default=DEFAULT_LANGUAGE, help="language of notes")
    status = sub.add_parser("status", help="set a commit status")
    status.add_argument("--sha", required=True)
    status.add_argument("--state", choices=STATUS_STATES, required=True)
    status.add_argument("--description", required=True)
    status.add_argument("--context", required=True)
    status.add_argument("--target-url", default=None)
    return parser


def _run(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    # Validate everything before any request, so bad input is a usage error (exit 2).
    try:
        if args.command == "comment":
            if args.kind == "commit":
                validate_sha(args.target)
            else:
                validate_number(args.target)
            validate_marker(args.marker)
            try:
                body = args.body_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ValueError(f"cannot read --body-file {args.body_file}: {exc.strerror or exc}") from None
        elif args.command == "pr-comment":
            validate_sha(args.head_sha)
            if args.run_url is not None and urllib.parse.urlsplit(args.run_url).scheme not in (
                "http",
                "https",
            ):
                raise ValueError(f"--run-url must be an http(s) URL, not {args.run_url!r}")
            pr_number, results = _read_graded_dir(args.graded_dir)
            body, description = unverified_report(results, args.lang, args.run_url)
        else:
            validate_sha(args.sha)
            if not args.context.strip():
                raise ValueError("--context must not be empty")
            if args.target_url is not None and urllib.parse.urlsplit(args.target_url).scheme not in (
                "http",
                "https",
            ):
                raise ValueError(f"--target-url must be an http(s) URL, not {args.target_url!r}")
        if not (env.get("GITHUB_TOKEN") or env.get("GH_TOKEN")):
            raise ValueError("no token: set GITHUB_TOKEN (or GH_TOKEN)")
        if not env.get("GITHUB_REPOSITORY"):
            raise ValueError("no repository: set GITHUB_REPOSITORY to owner/name")
        api = GitHubAPI.from_env(env)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None

    if args.command == "comment":
        return api.upsert_comment(args.kind, args.target, body, args.marker, lang=args.lang)
    if args.command == "pr-comment":
        # The artifact came from a run of the pull request's own workflow file, so its number
        # is only trusted once GitHub confirms that pull request's head is the graded commit.
        head = api.pull_request_head_sha(pr_number)
        if head != args.head_sha.lower():
            raise GitHubError(
                0,
                f"pull request {pr_number} has head {head}, not the graded commit "
                f"{args.head_sha}; not commenting",
            )
        url = api.upsert_comment("issue", pr_number, body, lang=args.lang)
        api.set_commit_status(head, "success", description, PR_STATUS_CONTEXT, args.run_url)
        return url
    data = api.set_commit_status(args.sha, args.state, args.description, args.context, args.target_url)
    return str(data.get("url") or "")


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """0 on success (the comment or status URL on stdout), 2 on bad input, 1 on an API error."""
    env = os.environ if env is None else env
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""

    def scrub(text: str) -> str:
        return text.replace(token, "***") if token else text

    args = _parser().parse_args(argv)  # exits 2 on a usage error, as argparse does
    try:
        url = _run(args, env)
    except _UsageError as exc:
        print(f"autograder.github.api: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except GitHubError as exc:
        print(f"autograder.github.api: {scrub(str(exc))}", file=sys.stderr)
        return 1
    if url:
        print(scrub(url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
