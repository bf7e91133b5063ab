"""A small local runner for a GitHub Actions job: executes its `run:` steps in order, as the
hosted runner would, with the GITHUB_* variables and files (GITHUB_OUTPUT, GITHUB_ENV,
GITHUB_STEP_SUMMARY, GITHUB_EVENT_PATH) in a temporary folder.

What it does not do, and how the tests account for it: `uses:` steps are not run (their
actions live on GitHub); the few the grading workflow uses are stood in for by the test's own
set-up (the workspace is already a clone, Python is this interpreter) or by a copy
(upload-artifact copies its `path` into `artifacts/`). Expressions are evaluated for the small
subset the workflows use (context look-ups, ==, !=, &&, ||, !, always/success/failure/cancelled)
with GitHub's rule that a missing value is null, and null equals ''.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\))"
    r"|(?P<name>[A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*(?:\(\))?))"
)
UNSUPPORTED = object()


@dataclass
class StepResult:
    name: str
    id: str | None
    kind: str  # "run" | "uses" | "skipped"
    outcome: str  # "success" | "failure" | "skipped"
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class JobRun:
    steps: list[StepResult]
    summary: str
    artifacts: Path

    def step(self, key: str) -> StepResult:
        for step in self.steps:
            if step.id == key or step.name == key:
                return step
        raise KeyError(key)

    @property
    def stdout(self) -> str:
        return "".join(step.stdout for step in self.steps)

    def annotations(self, level: str = "error") -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(f"::{level} ")]


def parse_env_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV as GitHub reads them: `name=value` or `name<<DELIM` heredocs."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"unterminated heredoc for {name!r}")
            i += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        else:
            raise ValueError(f"malformed line {line!r}")
    return values


class Expressions:
    """Evaluates `${{ }}` expressions against a context dict (github, env, vars, secrets, ...)."""

    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context
        self.status_ok = True

    def lookup(self, path: str) -> Any:
        value: Any = self.context
        for part in re.findall(r"[\w\-]+|\[\d+\]", path):
            if part.startswith("["):
                index = int(part[1:-1])
                value = value[index] if isinstance(value, list) and index < len(value) else None
            else:
                value = value.get(part) if isinstance(value, dict) else None
        return value

    def evaluate(self, expression: str) -> Any:
        tokens = []
        pos = 0
        expression = expression.strip()
        while pos < len(expression):
            match = _TOKEN.match(expression, pos)
            if not match or match.end() == pos:
                raise ValueError(f"unsupported expression: {expression!r}")
            pos = match.end()
            tokens.append(match)
        self._tokens, self._i = tokens, 0
        value = self._or()
        if self._i != len(tokens):
            raise ValueError(f"unsupported expression: {expression!r}")
        return value

    # recursive descent: or -> and -> not -> comparison -> atom
    def _peek(self) -> str | None:
        return self._tokens[self._i].group("op") if self._i < len(self._tokens) else None

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._i += 1
            right = self._and()
            left = left if _truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._not()
        while self._peek() == "&&":
            self._i += 1
            right = self._not()
            left = right if _truthy(left) else left
        return left

    def _not(self) -> Any:
        if self._peek() == "!":
            self._i += 1
            return not _truthy(self._not())
        return self._comparison()

    def _comparison(self) -> Any:
        left = self._atom()
        while self._peek() in ("==", "!="):
            op = self._peek()
            self._i += 1
            right = self._atom()
            equal = _loose_equal(left, right)
            left = equal if op == "==" else not equal
        return left

    def _atom(self) -> Any:
        token = self._tokens[self._i]
        self._i += 1
        if token.group("op") == "(":
            value = self._or()
            self._i += 1  # ")"
            return value
        if token.group("str") is not None:
            return token.group("str")[1:-1].replace("''", "'")
        if token.group("num") is not None:
            return float(token.group("num"))
        name = token.group("name")
        if name == "always()":
            return True
        if name == "success()":
            return self.status_ok
        if name == "failure()":
            return not self.status_ok
        if name == "cancelled()":
            return False
        if name in ("true", "false"):
            return name == "true"
        if name == "null":
            return None
        if name.endswith("()"):
            raise ValueError(f"unsupported function {name}")
        return self.lookup(name)

    def substitute(self, text: str) -> str:
        def one(match: re.Match) -> str:
            value = self.evaluate(match.group(1))
            if value is None:
                return ""
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, float) and value.is_integer():
                return str(int(value))
            return str(value)

        return _EXPR.sub(one, text)

    def condition(self, text: str | None) -> bool:
        if text is None:
            return self.status_ok
        text = str(text).strip()
        match = _EXPR.fullmatch(text)
        expression = match.group(1) if match else text
        uses_status = re.search(r"\b(always|success|failure|cancelled)\(\)", expression)
        value = _truthy(self.evaluate(expression))
        return value if uses_status else (value and self.status_ok)


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def _loose_equal(a: Any, b: Any) -> bool:
    # GitHub coerces mismatched types to numbers; for the cases the workflows use (a missing
    # value against '' or a string) null behaves as ''.
    a = "" if a is None else a
    b = "" if b is None else b
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()  # GitHub compares strings ignoring case
    return a == b


class LocalRunner:
    def __init__(
        self,
        workflow: Path,
        job: str,
        workspace: Path,
        temp: Path,
        *,
        github: dict[str, Any],
        secrets: dict[str, str] | None = None,
        variables: dict[str, str] | None = None,
        extra_env: dict[str, str] | None = None,
        stand_ins: dict[str, Any] | None = None,
    ) -> None:
        self.spec = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        self.job = self.spec["jobs"][job]
        self.workspace, self.temp = workspace, temp
        self.github = github
        self.secrets, self.vars = secrets or {}, variables or {}
        self.extra_env = extra_env or {}
        self.stand_ins = stand_ins or {}

    def run(self, skip_ids: tuple[str, ...] = ()) -> JobRun:
        temp = self.temp
        temp.mkdir(parents=True, exist_ok=True)
        (temp / "runner").mkdir(exist_ok=True)
        artifacts = temp / "artifacts"
        artifacts.mkdir(exist_ok=True)
        summary_total: list[str] = []
        steps_ctx: dict[str, Any] = {}
        context = {
            "github": self.github,
            "secrets": self.secrets,
            "vars": self.vars,
            "steps": steps_ctx,
            "runner": {"temp": str(temp / "runner"), "os": "Linux"},
            "env": {},
        }
        exprs = Expressions(context)
        env: dict[str, str] = {}
        for scope in (self.spec.get("env") or {}, self.job.get("env") or {}):
            for name, value in scope.items():
                context["env"] = dict(env)
                env[name] = exprs.substitute(str(value))
        results = []
        for index, step in enumerate(self.job["steps"]):
            name = step.get("name") or step.get("uses") or step.get("run", "").split("\n")[0]
            sid = step.get("id")
            context["env"] = dict(env)
            if sid in skip_ids or not exprs.condition(step.get("if")):
                results.append(StepResult(name, sid, "skipped", "skipped"))
                if sid:
                    steps_ctx[sid] = {"outcome": "skipped", "conclusion": "skipped", "outputs": {}}
                continue
            if "uses" in step:
                outcome = self._stand_in(step, exprs, artifacts)
                results.append(StepResult(name, sid, "uses", outcome))
                if sid:
                    steps_ctx[sid] = {"outcome": outcome, "conclusion": outcome, "outputs": {}}
                continue
            step_env = dict(env)
            for key, value in (step.get("env") or {}).items():
                step_env[key] = exprs.substitute(str(value))
            result, summary, new_env = self._run_script(index, name, sid, step, step_env, exprs)
            results.append(result)
            summary_total.append(summary)
            env.update(new_env)
            if sid:
                steps_ctx[sid] = {
                    "outcome": result.outcome,
                    "conclusion": result.outcome,
                    "outputs": result.outputs,
                }
            if result.outcome == "failure" and not step.get("continue-on-error"):
                exprs.status_ok = False
        return JobRun(results, "".join(summary_total), artifacts)

    def _stand_in(self, step: dict, exprs: Expressions, artifacts: Path) -> str:
        action = step["uses"].split("@")[0]
        if action == "actions/upload-artifact":
            name = exprs.substitute(str(step["with"]["name"]))
            src = self.workspace / exprs.substitute(str(step["with"]["path"]))
            if src.exists():
                shutil.copytree(src, artifacts / name, dirs_exist_ok=True)
            return "success"
        handler = self.stand_ins.get(action)
        if handler is not None:
            handler(step, exprs)
        return "success"

    def _run_script(
        self, index: int, name: str, sid: str | None, step: dict, step_env: dict[str, str], exprs: Expressions
    ):
        files = self.temp / f"step-{index}-{uuid.uuid4().hex[:6]}"
        files.mkdir()
        paths = {key: files / key.lower() for key in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_STEP_SUMMARY")}
        for path in paths.values():
            path.touch()
        script = files / "script.sh"
        # The script is the workflow's text as written: `${{ }}` would be substituted here by
        # GitHub, which is exactly why none may appear in a `run:` (a test checks that).
        script.write_text(exprs.substitute(step["run"]), encoding="utf-8")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(self.temp)),
            "LANG": "C.UTF-8",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "RUNNER_TEMP": str(self.temp / "runner"),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_EVENT_PATH": str(self.github["event_path"]),
            "GITHUB_SHA": self.github["sha"],
            "GITHUB_REF": self.github["ref"],
            "GITHUB_REF_NAME": self.github["ref_name"],
            "GITHUB_EVENT_NAME": self.github["event_name"],
            "GITHUB_REPOSITORY": self.github["repository"],
            "GITHUB_SERVER_URL": self.github["server_url"],
            "GITHUB_API_URL": self.github["api_url"],
            "GITHUB_RUN_ID": self.github["run_id"],
            **{key: str(path) for key, path in paths.items()},
            **self.extra_env,
            **step_env,
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        outputs = parse_env_file(paths["GITHUB_OUTPUT"].read_text(encoding="utf-8"))
        new_env = parse_env_file(paths["GITHUB_ENV"].read_text(encoding="utf-8"))
        outcome = "success" if proc.returncode == 0 else "failure"
        result = StepResult(name, sid, "run", outcome, proc.stdout, proc.stderr, outputs)
        return result, paths["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8"), new_env
