"""`autograder handout`: hand the course out without GitHub Classroom.

    autograder handout ROSTER [--organization ORG] [--template OWNER/REPO] [--prefix PREFIX]
                              [--dry-run] [--pause SECONDS] [--max-wait SECONDS] [--lang es|en]

From the roster (autograder/core/roster.py), one PRIVATE repository per learner in the course's
organization, generated from the template (POST /repos/{template}/generate), and the learner
invited with write access ("push"), never admin: an admin could make it public. The course-level
keys come from the roster (organization, template, repository_prefix) or, for a CSV roster, from
the options; an option that contradicts the roster is an error.

For each learner, the state is read first and only then changed:
  - the GitHub user must exist (GET /users/{login}), else that learner fails;
  - the repository: by repository_id when the roster has it (GET /repositories/{id}: a renamed
    repository is found and the new name written back, with a warning), else by name (GET
    /repos/{owner}/{repo}); missing: generated from the template; PUBLIC: reported, never
    touched, that learner fails;
  - the roster gets `repository` and `repository_id` at once, atomically, its comments and
    layout kept (core.roster_update.update): kill the run anywhere, run it again, it carries on;
  - access (GET .../collaborators/{login}/permission): admin is demoted to write (PUT) and
    reported; write or maintain stays; otherwise a pending invitation (GET .../invitations) with
    another permission is fixed (PATCH), and without one the learner is invited (PUT).
A finished roster run again makes no mutating request and leaves the roster byte-identical. A
learner that fails (unknown user, no template, GitHub's 422) is reported and the others go on.

Rate limits (autograder/github/rest.py's Limits): --pause seconds between mutating requests (1 by
default, GitHub's guidance for content creation), Retry-After and x-ratelimit-reset waited out,
and a wait longer than --max-wait stops the run cleanly, saying when to run it again.

The token comes from GITHUB_TOKEN (or GH_TOKEN) and is never printed; the API from
GITHUB_API_URL (default https://api.github.com). Exit status: 0 every learner done; 1 some
learners failed or the run stopped for a rate limit (they are listed); 2 unusable input (the
roster, a missing token or option).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from autograder.core import i18n, neutral, roster_update
from autograder.core import roster as rosters
from autograder.core.manifest import Course
from autograder.core.results import message
from autograder.github.rest import DEFAULT_API_URL, GitHubAPI, GitHubError, Limits, RateLimited

WRITE_ROLES = ("write", "maintain")  # what a learner may have; maintain cannot change visibility either


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "handout", help=message("cli.handout.help"), description=message("cli.handout.description")
    )
    parser.add_argument(
        "roster", type=Path, metavar=message("cli.metavar.file"), help=message("cli.handout.roster")
    )
    parser.add_argument(
        "--organization", default=None, metavar="ORG", help=message("cli.handout.organization")
    )
    parser.add_argument(
        "--template", default=None, metavar="OWNER/REPO", help=message("cli.handout.template")
    )
    parser.add_argument("--prefix", default=None, metavar="PREFIX", help=message("cli.handout.prefix"))
    parser.add_argument("--dry-run", action="store_true", help=message("cli.handout.dry_run"))
    parser.add_argument(
        "--pause", type=float, default=1.0, metavar="SECONDS", help=message("cli.handout.pause")
    )
    parser.add_argument(
        "--max-wait", type=float, default=900.0, metavar="SECONDS", help=message("cli.handout.max_wait")
    )
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.handout.lang"))


class Unusable(Exception):
    """Input the command cannot use at all (exit 2); `key` and `params` a catalog message."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.key, self.params = key, params


class Failed(Exception):
    """One learner could not be handed out; the others go on."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.key, self.params = key, params


class Say:
    """The instructor's messages, from the catalog (handout.yml), inert on a terminal."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def text(self, key: str, **params: Any) -> str:
        return neutral.terminal(i18n.translate(key, self.lang, **params))

    def __call__(self, key: str, **params: Any) -> None:
        print(self.text(key, **params), flush=True)

    def error(self, key: str, **params: Any) -> None:
        print(f"autograder handout: {self.text(key, **params)}", file=sys.stderr, flush=True)


def main(course: Course, args: argparse.Namespace, env: dict[str, str] | None = None) -> int:
    say = Say(args.lang or course.language)
    env = dict(os.environ if env is None else env)
    try:
        roster, api = _inputs(args, env, say)
    except Unusable as exc:
        say.error(exc.key, **exc.params)
        return 2
    except rosters.RosterError as exc:
        print(f"autograder handout: {neutral.terminal(i18n.localize(exc.text, say.lang))}", file=sys.stderr)
        return 2
    run = Run(api, roster, say, dry=args.dry_run, course=course.name)
    say(
        "handout.start",
        n=len(roster.learners),
        roster=str(args.roster),
        organization=roster.organization,
        template=roster.template,
        dry=say.text("handout.dry_note") if args.dry_run else "",
    )
    failed: list[str] = []
    for index, entry in enumerate(roster.learners):
        try:
            run.learner(entry)
        except Failed as exc:
            say("handout.failed", id=entry.id, reason=say.text(exc.key, id=entry.id, **exc.params))
            failed.append(entry.id)
        except RateLimited as exc:
            pending = [learner.id for learner in roster.learners[index:]]
            say(
                "handout.rate_stop_repeated" if exc.repeated else "handout.rate_stop",
                seconds=round(exc.wait),
                max_wait=round(args.max_wait),
                until=time.strftime("%H:%M", time.gmtime(exc.until)),
                pending=", ".join(pending),
            )
            return 1
        except GitHubError as exc:
            say("handout.failed", id=entry.id, reason=say.text("handout.fail_github", detail=_detail(exc)))
            failed.append(entry.id)
    if args.dry_run:
        say("handout.summary_dry", changes=run.changes, failed=len(failed))
    else:
        say("handout.summary", ready=len(roster.learners) - len(failed), failed=len(failed))
    if failed:
        say("handout.failed_list", ids=", ".join(failed))
        return 1
    return 0


def _detail(exc: GitHubError) -> str:
    return f"{exc.status} {exc.message}" if exc.status else exc.message


def _inputs(args: argparse.Namespace, env: dict[str, str], say: Say) -> tuple[rosters.Roster, GitHubAPI]:
    if not args.roster.is_file():
        raise Unusable(
            "batch.roster_unreadable", where=str(args.roster), detail=say.text("handout.not_a_file")
        )
    roster = rosters.load(args.roster)
    if roster.csv_url_in_repository:
        line, cells = roster.csv_header
        column = next(cell for cell in cells if cell.lower() in ("repo", "repository"))
        raise Unusable("handout.csv_urls", where=f"{args.roster}:{line}", column=column)
    course_keys = {}
    for field, option, value in (
        ("organization", "--organization", args.organization),
        ("template", "--template", args.template),
        ("repository_prefix", "--prefix", args.prefix),
    ):
        written = getattr(roster, field)
        if value is not None:
            if not rosters.valid_course_field(field, value):
                raise Unusable(
                    "handout.bad_option",
                    option=option,
                    value=value,
                    rule=message(f"batch.roster_rule_{field}"),
                )
            if written is not None and written != value:
                raise Unusable(
                    "handout.conflict",
                    roster=str(args.roster),
                    field=field,
                    written=written,
                    option=option,
                    value=value,
                )
        course_keys[field] = written if written is not None else value
    roster = dataclasses.replace(roster, **course_keys)
    if not roster.organization and any(not entry.repository for entry in roster.learners):
        raise Unusable("handout.no_organization", roster=str(args.roster))
    if not roster.template and any(not entry.repository_id for entry in roster.learners):
        raise Unusable("handout.no_template", roster=str(args.roster))
    for option, seconds in (("--pause", args.pause), ("--max-wait", args.max_wait)):
        if not seconds >= 0:
            raise Unusable("handout.bad_seconds", option=option, value=seconds)
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""
    if not token.strip():
        raise Unusable("handout.no_token", organization=roster.organization or "")
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    limits = Limits(
        mutation_interval=args.pause,
        max_wait=args.max_wait,
        on_wait=lambda seconds, why: say("handout.rate_wait", seconds=max(1, round(seconds))),
    )
    try:
        api = GitHubAPI(api_url, token.strip(), None, limits=limits)
    except ValueError:
        raise Unusable("handout.bad_api_url", url=api_url) from None
    return roster, api


class Run:
    """One pass over the roster: read GitHub's state, then change only what differs."""

    def __init__(self, api: GitHubAPI, roster: rosters.Roster, say: Say, *, dry: bool, course: str) -> None:
        self.api, self.roster, self.say, self.dry, self.course = api, roster, say, dry, course
        self.changes = 0  # what a dry run would do

    def learner(self, entry: rosters.Learner) -> None:
        where = f"{self.roster.path}:{entry.line}"
        if not entry.github:
            raise Failed("handout.fail_no_github", where=where)
        if self._get(f"/users/{entry.github}") is None:
            raise Failed("handout.fail_unknown_user", github=entry.github, where=where)
        repo = self._repository(entry, where)
        if repo is None:
            return  # a dry run: nothing exists to invite to
        self._access(entry, repo["full_name"])

    # -- the repository

    def _repository(self, entry: rosters.Learner, where: str) -> dict | None:
        wanted = self.roster.repository(entry)
        if entry.repository_id:
            repo = self._get(f"/repositories/{entry.repository_id}")
            if repo is None:
                raise Failed("handout.fail_id_gone", repository_id=entry.repository_id, where=where)
        else:
            repo = self._get(f"/repos/{wanted}")
            if repo is not None and repo["full_name"].lower() == wanted.lower():
                self.say("handout.exists", id=entry.id, repository=repo["full_name"])
        if repo is not None and repo["full_name"].lower() != wanted.lower():
            self.say(
                "handout.renamed", id=entry.id, old=wanted, new=repo["full_name"], repository_id=repo["id"]
            )
        if repo is None:
            repo = self._create(entry, wanted)
            if repo is None:
                return None
        if not repo.get("private", False):
            raise Failed("handout.fail_public", repository=repo["full_name"])
        self._record(entry, repository=repo["full_name"], repository_id=int(repo["id"]))
        return repo

    def _create(self, entry: rosters.Learner, wanted: str) -> dict | None:
        template = self.roster.template
        if self.dry:
            self.changes += 1
            self.say("handout.would_create", id=entry.id, repository=wanted, template=template)
            self.changes += 1
            self.say("handout.would_invite", id=entry.id, github=entry.github, repository=wanted)
            return None
        owner, name = wanted.split("/")
        try:
            description = self.say.text("handout.description", course=self.course, id=entry.id)
            repo = self.api.request(
                "POST",
                f"/repos/{template}/generate",
                {
                    "owner": owner,
                    "name": name,
                    "private": True,
                    "include_all_branches": False,
                    "description": description,
                },
            )
        except GitHubError as exc:
            if exc.status == 404:
                raise Failed("handout.fail_no_template", template=template) from None
            if exc.status == 422:
                raise Failed("handout.fail_create", repository=wanted, detail=_detail(exc)) from None
            raise
        if not isinstance(repo, dict) or "id" not in repo or "full_name" not in repo:
            raise Failed("handout.fail_github", detail="POST generate: no repository in the answer")
        self.say("handout.created", id=entry.id, repository=repo["full_name"], template=template)
        return repo

    def _record(self, entry: rosters.Learner, **fields: Any) -> None:
        if self.dry:
            return
        try:
            in_place = roster_update.update(self.roster.path, entry.id, **fields)
        except OSError as exc:
            raise Failed("handout.fail_write", roster=str(self.roster.path), detail=str(exc)) from None
        if in_place is False:
            self.say("handout.roster_rewritten", roster=str(self.roster.path))

    # -- the learner's access

    def _access(self, entry: rosters.Learner, repository: str) -> None:
        login = entry.github
        permission = self._get(f"/repos/{repository}/collaborators/{login}/permission") or {}
        role = permission.get("role_name") or permission.get("permission") or "none"
        params = {"id": entry.id, "github": login, "repository": repository}
        if role == "admin":
            self._mutate(
                "handout.would_demote",
                "handout.demoted",
                params,
                "PUT",
                f"/repos/{repository}/collaborators/{login}",
                {"permission": "push"},
            )
            return
        if role in WRITE_ROLES:
            self.say("handout.ready", **params)
            return
        invitation = next(
            (
                item
                for item in self.api.paginate(f"/repos/{repository}/invitations")
                if str((item.get("invitee") or {}).get("login", "")).lower() == login.lower()
            ),
            None,
        )
        if invitation is not None:
            was = invitation.get("permissions")
            if was == "write":
                self.say("handout.pending", **params)
                return
            self._mutate(
                "handout.would_fix_invitation",
                "handout.invitation_fixed",
                {**params, "was": was},
                "PATCH",
                f"/repos/{repository}/invitations/{int(invitation['id'])}",
                {"permissions": "write"},
            )
            return
        answer = self._mutate(
            "handout.would_invite",
            None,
            params,
            "PUT",
            f"/repos/{repository}/collaborators/{login}",
            {"permission": "push"},
        )
        if answer is not None:
            self.say("handout.invited" if answer.status == 201 else "handout.added", **params)

    # -- requests

    def _get(self, path: str) -> Any:
        """The resource, or None when GitHub answers 404."""
        try:
            return self.api.request("GET", path)
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise

    def _mutate(self, dry_key: str, done_key: str | None, params: dict, method: str, path: str, body: dict):
        if self.dry:
            self.changes += 1
            self.say(dry_key, **params)
            return None
        answer = self.api.exchange(method, path, body)
        if done_key is not None:
            self.say(done_key, **params)
        return answer
