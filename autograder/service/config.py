"""Every setting of `autograder serve`, in one place, with one precedence: the command line, over
the environment ($AUTOGRADER_SERVE_<OPTION>, e.g. AUTOGRADER_SERVE_PUBLIC_URL; the GitHub API
also from $GITHUB_API_URL), over the defaults below.

    --roster FILE          the course's roster (core/roster.py): who may submit, by repository_id
    --public-url URL       the service's address as learners reach it, exactly: the tokens'
                           audience and the base of every link the service gives. HTTPS, except
                           on 127.0.0.1 / localhost / ::1 (the documented production setup binds
                           127.0.0.1 behind a TLS proxy, with --public-url the proxy's https URL)
    --issuer URL           the OIDC issuer (default GitHub Actions')
    --data DIR             the SQLite store and the queue's file (default ./servicio)
    --database-url URL     another database (postgresql+psycopg://...); default SQLite in --data
    --queue-url URL        another queue (redis://...); default SQLite in --data
    --github-api URL       GitHub's REST API (default https://api.github.com)
    --clone-url TEMPLATE   where a learner's commit is fetched from, {repository} = OWNER/NAME
    --allow-scheme, --allow-host   what the clone URL may use (as grade-all's)
    --workers N            grading processes (0: the app alone; workers run elsewhere)
    --lease SECONDS        a grading not heard from for this long is a lost worker's
    --per-hour N           submissions per repository per hour dated with GitHub (beyond: by the token)
    --max-body BYTES       the largest request body accepted (nothing in it is read)
    --wait SECONDS         how long the learner's job is told to wait for a verdict
    --host, --port         where the app listens (default 127.0.0.1:8000)
    --lessons LESSON ...   grade only these lessons (default every lesson of course.yml)

`ServiceConfig.checked()` refuses a configuration the service must not start with (a public URL
over plain HTTP on a host that is not this machine, an issuer that is not HTTPS, a clone URL
template without {repository}, ...) with a ConfigError whose catalog text names the option and
what to do.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.cohort.roster import Allowed
from autograder.core.results import Text, message

ENV_PREFIX = "AUTOGRADER_SERVE_"
DEFAULT_DATA = Path("servicio")
DATABASE_FILE = "servicio.db"
DEFAULT_API = "https://api.github.com"
DEFAULT_CLONE_URL = "https://github.com/{repository}.git"
SCHEMES = ("https", "ssh", "http", "file")  # file: local mirrors (and the tests' bare repositories)
LOOPBACK_NAMES = ("localhost",)

# Nothing of the [service] extra is imported at module level: `serve`'s options are part of
# every `autograder --help`, learners' installs included (jwks.py needs PyJWT).


def github_issuer() -> str:
    from autograder.service.jwks import GITHUB_ISSUER

    return GITHUB_ISSUER


class ConfigError(Exception):
    """A setting the service cannot start with; `text` says which and what to do."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.text: Text = message(key, **params)


@dataclass(frozen=True)
class Limits:
    per_hour: int = 30  # a learner pushing every two minutes for an hour; beyond, no GitHub lookup
    body_bytes: int = 16 * 1024  # nothing in the body is read: the cap only bounds the work
    wait_s: float = 300.0  # the job waits this long for a verdict, then says "en cola"


@dataclass(frozen=True)
class ServiceConfig:
    course_file: Path
    roster_file: Path
    public_url: str
    issuer: str = field(default_factory=github_issuer)
    data_dir: Path = DEFAULT_DATA
    database_url: str | None = None  # None: SQLite in data_dir
    queue_url: str | None = None  # None: SQLite in data_dir
    api_url: str = DEFAULT_API
    clone_url: str = DEFAULT_CLONE_URL
    allowed: Allowed = field(default_factory=Allowed)
    workers: int = 1
    lease_s: float = 30.0
    limits: Limits = field(default_factory=Limits)
    host: str = "127.0.0.1"
    port: int = 8000
    lessons: tuple[str, ...] | None = None

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{(Path(self.data_dir) / DATABASE_FILE).resolve()}"

    @property
    def prefix(self) -> str:
        """The path of the public URL ("" or "/grader"): every route lives below it."""
        return urllib.parse.urlsplit(self.public_url).path

    def url(self, path: str) -> str:
        """A link the service gives: the public URL and `path` ("/s/KEY")."""
        return self.public_url + path

    def checked(self) -> ServiceConfig:
        """This configuration, or ConfigError for the first setting the service must not start with."""
        from autograder.service.jwks import allowed_url

        check_public_url(self.public_url)
        if not allowed_url(self.issuer):
            raise ConfigError("service.serve.issuer_not_https", issuer=self.issuer)
        if not allowed_url(self.api_url):
            raise ConfigError("service.serve.api_not_https", url=self.api_url)
        if "{repository}" not in self.clone_url:
            raise ConfigError("service.serve.clone_url_template", template=self.clone_url)
        for option, value, low in (
            ("--workers", self.workers, 0),
            ("--lease", self.lease_s, 1),
            ("--per-hour", self.limits.per_hour, 1),
            ("--max-body", self.limits.body_bytes, 1024),
            ("--wait", self.limits.wait_s, 0),
            ("--port", self.port, 0),
        ):
            if value < low or (option == "--port" and value > 65535):
                raise ConfigError("service.serve.bad_number", option=option, value=value, low=low)
        return self


def check_public_url(url: str) -> None:
    """HTTPS, or HTTP on this machine only; no trailing slash, query, fragment or credentials
    (it is compared with the tokens' audience exactly, and links are built by appending)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ConfigError("service.serve.public_url_shape", url=url) from None
    if (
        parts.scheme not in ("https", "http")
        or not host
        or parts.query
        or parts.fragment
        or parts.username
        or parts.password
        or url.endswith("/")
    ):
        raise ConfigError("service.serve.public_url_shape", url=url)
    if parts.scheme == "http" and not is_loopback(host):
        raise ConfigError("service.serve.public_url_not_https", url=url, host=host)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def env_name(option: str) -> str:
    """The environment variable of an option: --public-url -> AUTOGRADER_SERVE_PUBLIC_URL."""
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").upper()


def from_args(
    args: Any, course_file: Path, environ: Mapping[str, str] = os.environ, *, serving: bool = True
) -> ServiceConfig:
    """The configuration from parsed arguments (serve.add_parser), then the environment, then
    the defaults; not yet checked (`checked()`). Not `serving` (an export), the public URL may
    be absent."""

    def pick(option: str, default: Any = None, *, extra_env: tuple[str, ...] = ()) -> Any:
        given = getattr(args, option.lstrip("-").replace("-", "_"), None)
        if given is not None:
            return given
        for name in (env_name(option), *extra_env):
            value = environ.get(name, "").strip()
            if value:
                return value
        return default

    def number(option: str, default: float, kind=int) -> Any:
        value = pick(option, default)
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise ConfigError("service.serve.not_a_number", option=option, value=value) from None

    roster = pick("--roster")
    public_url = pick("--public-url")
    if not roster:
        raise ConfigError("service.serve.missing", option="--roster", env=env_name("--roster"))
    if not public_url and serving:
        raise ConfigError("service.serve.missing", option="--public-url", env=env_name("--public-url"))
    schemes = args.allow_scheme or _listed(environ.get(env_name("--allow-scheme"), ""))
    hosts = args.allow_host or _listed(environ.get(env_name("--allow-host"), ""))
    for scheme in schemes:
        if scheme not in SCHEMES:
            raise ConfigError("service.serve.bad_scheme", scheme=scheme, schemes=", ".join(SCHEMES))
    default = Allowed()
    allowed = Allowed(
        tuple(dict.fromkeys(schemes or default.schemes)),
        tuple(dict.fromkeys(host.lower().strip("[]") for host in (hosts or default.hosts))),
    )
    limits = Limits(
        per_hour=number("--per-hour", Limits.per_hour),
        body_bytes=number("--max-body", Limits.body_bytes),
        wait_s=number("--wait", Limits.wait_s, float),
    )
    config = ServiceConfig(
        course_file=Path(course_file),
        roster_file=Path(roster),
        public_url=str(public_url or ""),
        issuer=str(pick("--issuer") or github_issuer()),
        data_dir=Path(pick("--data", DEFAULT_DATA)),
        database_url=pick("--database-url"),
        queue_url=pick("--queue-url"),
        api_url=str(pick("--github-api", DEFAULT_API, extra_env=("GITHUB_API_URL",))).rstrip("/"),
        clone_url=str(pick("--clone-url", DEFAULT_CLONE_URL)),
        allowed=allowed,
        workers=number("--workers", 1),
        lease_s=number("--lease", 30.0, float),
        limits=limits,
        host=str(pick("--host", "127.0.0.1")),
        port=number("--port", 8000),
        lessons=tuple(args.lessons) if getattr(args, "lessons", None) else None,
    )
    return config


def _listed(text: str) -> list[str]:
    return [item.strip() for item in text.replace(",", " ").split() if item.strip()]


__all__ = [
    "ConfigError",
    "Limits",
    "ServiceConfig",
    "check_public_url",
    "env_name",
    "from_args",
    "is_loopback",
]


def add_store_options(parser, *, data_help, database_url_help) -> None:
    """--data and --database-url as `serve` has them, for a command that opens the service's store
    (`autograder staff`, `autograder regrade`); `store_url` reads them."""
    parser.add_argument("--data", type=Path, default=None, metavar=message("cli.metavar.dir"), help=data_help)
    parser.add_argument("--database-url", default=None, metavar="URL", help=database_url_help)


def store_url(args, environ: Mapping[str, str] = os.environ) -> str:
    """The store `serve` would open with the same options and environment (--database-url, else
    SQLite in --data): what `autograder staff` and `autograder regrade` open."""
    given = getattr(args, "database_url", None) or environ.get(env_name("--database-url"), "").strip()
    if given:
        return given
    data = getattr(args, "data", None) or Path(environ.get(env_name("--data"), "").strip() or DEFAULT_DATA)
    return f"sqlite:///{(Path(data) / DATABASE_FILE).resolve()}"
