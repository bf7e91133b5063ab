"""Structured logs for the service and its workers: one JSON object a line on stderr,

    {"ts": "2026-03-02T09:00:00.123Z", "level": "INFO", "logger": "autograder.service.checks",
     "event": "check run posted", "fields": {"result": 12, "learner": "ana", ...}}

when AUTOGRADER_SERVE_LOG_FORMAT=json (or `configure("json")`); "text" (the default) leaves
Python's logging as it was. `event` is the log call's message; `fields` what the call passed as
`extra={"fields": {...}}`, plus `exception` (the traceback) when there is one.

What a log line never carries: a token (GitHub's ghs_/ghp_/gho_/ghu_/ghr_/github_pat_ tokens,
JWTs such as the learners' OIDC tokens and the App's, a Bearer/Basic/token credential, a
password in a URL, and the metrics token itself are replaced by "[redacted]" in the event, every
field and the traceback), and no learner's file content: the service's modules log ids, states
and counts, never a file, and each string is cut (EVENT_CHARS, FIELD_CHARS) so that nothing
large, whatever it is, reaches the log whole.

`serve` and `autograder worker` call `configure()` once at start (the option, else the
variable; LogFormatError, with its catalog text, for a word that is not a format); uvicorn is then
given `uvicorn_log_config(format)` so that its own loggers go through the same handler. uvicorn's
access log stays off: a request's path may be a submission's page, whose key is its secret.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, TextIO

from autograder.core.results import message

FORMAT_VARIABLE = "AUTOGRADER_SERVE_LOG_FORMAT"
FORMATS = ("text", "json")
EVENT_CHARS = 2000
FIELD_CHARS = 500
TRACE_CHARS = 8000
REDACTED = "[redacted]"
_SECRETS = (
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,})"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),  # a JWT
)
_CREDENTIAL = re.compile(
    r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}|\b(token|password|secret)(\s*[=:]\s*)[^\s,;&\"']{4,}"
)
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+):[^@\s/]+@")


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    for secret in extra:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in _SECRETS:
        text = pattern.sub(REDACTED, text)
    text = _CREDENTIAL.sub(lambda m: f"{m.group(1) or m.group(3)}{m.group(2) or m.group(4)}{REDACTED}", text)
    return _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit})"


class JSONFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def _clean(self, value: Any, limit: int = FIELD_CHARS) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
            return value
        if isinstance(value, Mapping):
            return {str(k): self._clean(v, limit) for k, v in list(value.items())[:50]}
        if isinstance(value, (list, tuple, set)):
            return [self._clean(v, limit) for v in list(value)[:50]]
        return _cut(redact(str(value), self.secrets), limit)

    def format(self, record: logging.LogRecord) -> str:
        try:
            event = record.getMessage()
        except (TypeError, ValueError):
            event = str(record.msg)
        fields = getattr(record, "fields", None)
        fields = dict(self._clean(fields)) if isinstance(fields, Mapping) else {}
        if record.exc_info:
            fields["exception"] = self._clean(self.formatException(record.exc_info), TRACE_CHARS)
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "event": self._clean(event, EVENT_CHARS),
            "fields": fields,
        }
        return json.dumps(line, ensure_ascii=False, default=str)


class LogFormatError(ValueError):
    """A log format that is neither "text" nor "json"; `text` says so in the catalog's words."""

    def __init__(self, value: str) -> None:
        super().__init__(f"{FORMAT_VARIABLE} must be one of {', '.join(FORMATS)}, not {value!r}")
        self.text = message("service.ops.log_format", variable=FORMAT_VARIABLE, value=value)


def chosen(option: str | None = None, env: Mapping[str, str] = os.environ) -> str:
    """The log format: the option, else AUTOGRADER_SERVE_LOG_FORMAT, else "text"; LogFormatError
    (a ValueError) for another word."""
    value = (option or env.get(FORMAT_VARIABLE) or "text").strip().lower()
    if value not in FORMATS:
        raise LogFormatError(value)
    return value


def configure(
    option: str | None = None,
    *,
    env: Mapping[str, str] = os.environ,
    stream: TextIO | None = None,
    level: int = logging.INFO,
) -> str:
    """Set the process's logging up as chosen (see `chosen`); returns the format. "json": the
    root logger gets one handler writing JSON lines to `stream` (stderr), the service's loggers
    log from `level` up; "text": nothing changes."""
    fmt = chosen(option, env)
    if fmt != "json":
        return fmt
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter(secrets=((env.get("AUTOGRADER_SERVE_METRICS_TOKEN") or "").strip(),)))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_autograder", False)]:
        root.removeHandler(old)
    handler._autograder = True  # type: ignore[attr-defined] - ours, replaced by a second configure()
    root.addHandler(handler)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)  # other libraries: warnings and errors
    logging.getLogger("autograder").setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "huey"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    return fmt


def uvicorn_log_config(fmt: str) -> dict | None:
    """What `serve` gives uvicorn.Config(log_config=...): None with JSON logs (uvicorn then
    leaves logging to `configure`), uvicorn's own default otherwise."""
    if fmt == "json":
        return None
    from uvicorn.config import LOGGING_CONFIG

    return LOGGING_CONFIG
