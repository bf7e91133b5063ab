"""The deployment examples (deploy/): the Kubernetes manifests are valid Kubernetes 1.33 objects
(the `kubernetes-validate` package's bundled schemas, strict: an unknown field fails), the
Indexed Job's own shell gives the shards 1..N exactly once each and the merge Job merges exactly
those N folders (both scripts run here through sh and bash, with a stand-in `autograder` that
records its arguments, which the real command-line parser then accepts), and deploy/compose.yaml
is valid against the Compose Specification's JSON schema.

Docker and Kubernetes cannot run on this machine: nothing here starts a container or a cluster.
The compose schema is read from the docker-compose 1.29.2 wheel (compose/config/compose_spec.json,
Apache-2.0), which `.ci/run` downloads once into ~/.cache/autograder-ci (never installed); without
it the compose tests fail and say how to get it."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml
from support.project import ROOT

DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
# backoffLimitPerIndex and maxFailedIndexes are GA (on by default) from Kubernetes 1.33.
KUBERNETES_VERSION = "1.33.0"
COMPOSE_WHEEL = Path.home() / ".cache" / "autograder-ci" / "docker_compose-1.29.2-py2.py3-none-any.whl"
COMPOSE_WHEEL_SHA256 = "8d5589373b35c8d3b1c8c1182c6e4a4ff14bffa3dd0b605fcd08f73c94cef809"  # PyPI's file
IMAGE_UID = 10001  # deploy/Dockerfile's USER


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def _one(path: Path, kind: str, name: str | None = None) -> dict:
    found = [d for d in _documents(path) if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, (path.name, kind, name)
    return found[0]


def _env(container: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@functools.cache
def _parser():
    from autograder.cli import build_parser

    return build_parser()


def _parses(argv: list[str]) -> None:
    """The real command line accepts these arguments (options renamed since would fail here)."""
    try:
        _parser().parse_args(argv)
    except SystemExit as exc:  # argparse's way of refusing
        raise AssertionError(f"autograder refuses {argv}") from exc


# ------------------------------------------------------------------------------ Kubernetes


MANIFESTS = sorted(KUBERNETES.glob("*.yaml"))


def test_the_manifests_are_there():
    assert {p.name for p in MANIFESTS} >= {
        "grade-all-volume.yaml",
        "grade-all-shards.yaml",
        "grade-all-merge.yaml",
        "service.yaml",
    }


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_a_valid_kubernetes_object(path):
    import kubernetes_validate

    for doc in _documents(path):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_validator_really_rejects(tmp_path):
    """Not a no-op: a misspelt field, a wrong type and a missing required field are refused."""
    import kubernetes_validate

    job = _one(KUBERNETES / "grade-all-shards.yaml", "Job")
    for spoil in (
        lambda j: j["spec"].update(backoffLimitPerIndx=2),
        lambda j: j["spec"].update(completions="twenty"),
        lambda j: j["spec"]["podFailurePolicy"]["rules"][1]["onPodConditions"][0].pop("status"),
    ):
        bad = json.loads(json.dumps(job))
        spoil(bad)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def _pod(job: dict) -> tuple[dict, dict]:
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def _walled(spec: dict, container: dict) -> None:
    """No root, no capability, no privilege escalation, the runtime's default seccomp profile:
    the grading processes' Landlock and seccomp walls need nothing more."""
    context = spec["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] == IMAGE_UID
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]


def test_the_indexed_job_shards_and_its_merge():
    job = _one(KUBERNETES / "grade-all-shards.yaml", "Job", "grade-all-shards")
    spec = job["spec"]
    pod, container = _pod(job)
    env = _env(container)
    count = int(env["SHARDS"])
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == count
    assert spec["backoffLimitPerIndex"] >= 1 and 0 <= spec["maxFailedIndexes"] <= count
    assert pod["restartPolicy"] == "Never"  # what podFailurePolicy and per-index backoff need
    rules = spec["podFailurePolicy"]["rules"]
    assert {
        "action": "FailIndex",
        "onExitCodes": {"containerName": container["name"], "operator": "In", "values": [2]},
    } in rules
    assert any(
        r["action"] == "Ignore" and r["onPodConditions"][0]["type"] == "DisruptionTarget" for r in rules
    )
    _walled(pod, container)
    # One learner at a time per CPU requested (grade-all's default would count the node's CPUs).
    assert env["JOBS"] == container["resources"]["requests"]["cpu"]
    assert env["AUTOGRADER_ROSTER_TOKEN"] == {
        "secretKeyRef": {"name": "autograder-roster-token", "key": "token", "optional": True}
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"]["claimName"] == "grade-all-results"
    assert "secret" in volumes["roster"]  # names and e-mails: a Secret, not a ConfigMap
    claim = _one(KUBERNETES / "grade-all-volume.yaml", "PersistentVolumeClaim", "grade-all-results")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every shard's pod mounts it at once

    merge = _one(KUBERNETES / "grade-all-merge.yaml", "Job", "grade-all-merge")
    merge_pod, merge_container = _pod(merge)
    _walled(merge_pod, merge_container)
    assert _env(merge_container)["SHARDS"] == env["SHARDS"]
    assert {v["name"]: v for v in merge_pod["volumes"]}["results"] == volumes["results"]
    assert container["image"] == merge_container["image"]


def _stub(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in `autograder` on PATH (a shell script: fast) that appends its arguments and
    the git configuration key it was given (the token's) as one line to calls.txt."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.txt"
    stub = bin_dir / "autograder"
    stub.write_text(
        f"#!/bin/sh\n{{ printf '%s\\037' \"$@\"; printf '|%s\\n' \"${{GIT_CONFIG_KEY_0:-}}\"; }} >> '{calls}'\n",
        encoding="utf-8",
    )
    stub.chmod(0o755)
    return bin_dir, calls


def _calls(calls: Path) -> list[dict]:
    found = []
    for line in calls.read_text(encoding="utf-8").splitlines():
        argv, _, git = line.rpartition("|")
        found.append({"argv": argv.split("\037")[:-1], "git": git or None})
    return found


def _run_script(container: dict, shell: str, env: dict[str, str]) -> None:
    command = container["command"]
    assert command == ["/bin/sh", "-c"]
    (script,) = container["args"]
    proc = subprocess.run([shell, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shell", ["/bin/sh", "bash"])
def test_the_indexed_jobs_shell_grades_shards_1_to_n_and_the_merge_takes_exactly_them(tmp_path, shell):
    job = _one(KUBERNETES / "grade-all-shards.yaml", "Job", "grade-all-shards")
    _, container = _pod(job)
    merge_container = _pod(_one(KUBERNETES / "grade-all-merge.yaml", "Job"))[1]
    bin_dir, calls = _stub(tmp_path)
    results = tmp_path / "results"
    for count in (1, 3, int(_env(container)["SHARDS"])):
        calls.unlink(missing_ok=True)
        base = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "SHARDS": str(count),
            "SEED": "7",
            "JOBS": "4",
            "RESULTS": str(results),
        }
        for index in range(count):  # what Kubernetes sets in pod I of an Indexed Job
            token = {"AUTOGRADER_ROSTER_TOKEN": "t0ken"} if index == 0 else {}
            _run_script(container, shell, {**base, **token, "JOB_COMPLETION_INDEX": str(index)})
        shards = _calls(calls)
        given = [call["argv"][call["argv"].index("--shard") + 1] for call in shards]
        assert given == [f"{i}/{count}" for i in range(1, count + 1)]  # 1..N, each once, in index order
        outs = [call["argv"][call["argv"].index("--out") + 1] for call in shards]
        assert len(set(outs)) == count and all(Path(out).is_dir() for out in outs)
        assert shards[0]["git"] == "url.https://x-access-token:t0ken@github.com/.insteadOf"
        assert all(call["git"] is None for call in shards[1:])  # no token, no git configuration
        for call in shards:
            _parses(call["argv"])

        calls.unlink()
        _run_script(merge_container, shell, base)
        (merged,) = [call["argv"] for call in _calls(calls)]
        assert merged[:2] == ["grade-all", "--merge"]
        assert merged[2 : 2 + count] == outs and merged[2 + count] == "--out"
        assert merged[merged.index("--out") + 1] not in outs
        _parses(merged)


def test_the_service_and_its_workers_at_scale():
    path = KUBERNETES / "service.yaml"
    service = _one(path, "Deployment", "autograder-service")
    pod, container = _pod(service)
    _walled(pod, container)
    args = container["args"]
    assert args[0] == "serve" and "--workers=0" in args and "--host=0.0.0.0" in args
    _parses(args)
    # /readyz is unready without a running worker: routing on it would refuse learners' pushes
    # that the service can queue, so readiness leaves the workers out (?workers=no).
    assert container["livenessProbe"]["tcpSocket"]["port"] == "http"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz?workers=no"
    env = _env(container)
    assert env["AUTOGRADER_SERVE_DATABASE_URL"]["secretKeyRef"]["name"] == "autograder-service"
    assert "AUTOGRADER_GITHUB_APP_KEY" in env and "AUTOGRADER_SERVE_METRICS_TOKEN" in env

    workers = _one(path, "Deployment", "autograder-worker")
    worker_pod, worker = _pod(workers)
    _walled(worker_pod, worker)
    assert worker["args"][0] == "worker"
    _parses(worker["args"])
    worker_env = _env(worker)
    # Only the service holds the GitHub credential: a worker reads the stored archive.
    assert not [name for name in worker_env if "GITHUB" in name or "TOKEN" in name]
    assert worker_env["AUTOGRADER_SERVE_QUEUE_URL"] == env["AUTOGRADER_SERVE_QUEUE_URL"]
    assert worker["image"] == container["image"]  # the same graders, or the worker refuses the tasks
    policy = _one(path, "NetworkPolicy", "autograder-worker")
    assert policy["spec"]["podSelector"]["matchLabels"] == workers["spec"]["selector"]["matchLabels"]
    ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert ports == {5432, 6379, 53}


# ------------------------------------------------------------------------------ compose


def _compose_schema() -> dict:
    assert COMPOSE_WHEEL.is_file(), (
        f"{COMPOSE_WHEEL} is missing: the compose test reads the Compose Specification's schema from it. "
        "Run .ci/run, or: python3 -m pip download --no-deps docker-compose==1.29.2 -d "
        f"{COMPOSE_WHEEL.parent}"
    )
    data = COMPOSE_WHEEL.read_bytes()
    assert hashlib.sha256(data).hexdigest() == COMPOSE_WHEEL_SHA256, f"{COMPOSE_WHEEL} is not PyPI's file"
    with zipfile.ZipFile(COMPOSE_WHEEL) as wheel:
        return json.loads(wheel.read("compose/config/compose_spec.json"))


# Compose's durations are Go's ("10s", "1m30s"), not ISO 8601's (jsonschema's "duration").
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


def _compose_errors(document: dict) -> list[str]:
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("duration")(lambda value: not isinstance(value, str) or bool(GO_DURATION.match(value)))
    validator = jsonschema.Draft201909Validator(_compose_schema(), format_checker=checker)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def test_the_compose_file_follows_the_compose_specification():
    assert _compose_errors(_compose()) == []


def test_the_compose_schema_really_rejects():
    for spoil in (
        lambda c: c["services"]["worker"].update(scael=3),
        lambda c: c["services"]["service"]["healthcheck"].update(interval="15 seconds"),
        lambda c: c["services"]["service"]["depends_on"]["redis"].update(condition="service_ready"),
        lambda c: c.update(name="autograder"),  # the 1.29.2 schema predates the top-level name
    ):
        bad = _compose()
        spoil(bad)
        assert _compose_errors(bad), spoil


def _autograder_argv(service: dict) -> list[str]:
    """A service's arguments to autograder (the image's entrypoint), ${VAR:?...} given a value."""
    assert "entrypoint" not in service  # the image's: deploy/entrypoint.sh
    return [re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "https://notas.example", arg) for arg in service["command"]]


def test_the_compose_topology():
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"service", "worker", "postgres", "redis"}
    app, worker = services["service"], services["worker"]
    serve = _autograder_argv(app)
    assert serve[0] == "serve" and "--workers=0" in serve and "--host=0.0.0.0" in serve
    _parses(serve)
    work = _autograder_argv(worker)
    assert work[0] == "worker"
    _parses(work)
    # The workers wait for the service's health; plain /readyz waits for a worker: not here.
    assert "/readyz?workers=no" in " ".join(app["healthcheck"]["test"])
    assert app["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    assert worker["depends_on"] == {"service": {"condition": "service_healthy"}}
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"]
    # Scalable: no fixed container name, a replica count, `--scale worker=N`.
    assert "container_name" not in worker and worker["deploy"]["replicas"] >= 1
    # The App's key is a secret file, given to the service only.
    assert "github_app_key" in app["secrets"] and "github_app_key" not in worker.get("secrets", [])
    assert app["environment"]["AUTOGRADER_GITHUB_APP_KEY"] == "/run/secrets/github_app_key"
    assert not [k for k in worker["environment"] if "GITHUB" in k]
    assert set(compose["secrets"]) >= {"github_app_key", "postgres_password", "metrics_token"}
    # No password in a URL: libpq's PGPASSWORD, read by the entrypoint from the secret's file.
    for client in (app, worker):
        assert "@postgres:5432/" in client["environment"]["AUTOGRADER_SERVE_DATABASE_URL"]
        assert ":" not in client["environment"]["AUTOGRADER_SERVE_DATABASE_URL"].split("//")[1].split("@")[0]
        assert client["environment"]["PGPASSWORD_FILE"] == "/run/secrets/postgres_password"
    # The workers reach the store and the queue only.
    assert worker["networks"] == ["backend"] and compose["networks"]["backend"]["internal"] is True
    for walled in (app, worker):
        assert walled["user"] == f"{IMAGE_UID}:{IMAGE_UID}" and walled["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in walled["security_opt"]
        assert not walled.get("privileged") and "cap_add" not in walled
    # Same image: a worker refuses tasks whose graders' hash differs from its own.
    assert app["image"] == worker["image"]


def test_the_compose_file_says_what_the_walls_need():
    text = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    comments = " ".join(line.strip("# ") for line in text.splitlines() if line.lstrip().startswith("#"))
    for needle in (
        "Landlock",
        "seccomp",
        "namespaces",
        "isolation",
        '"official": true',
        '"namespaces": []',
        "seccomp=unconfined",
        "apparmor=unconfined",
        "no Docker",
    ):
        assert needle in comments, needle


def test_the_image_installs_cpu_torch_first_as_the_uid_the_manifests_use():
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    pin = re.search(r'"(torch==[^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8")).group(1)
    cpu = text.index(
        f"pip install --no-cache-dir --disable-pip-version-check {pin} --index-url https://download.pytorch.org/whl/cpu"
    )
    assert 0 <= cpu < text.index('-e ".[service,instructor]"')
    assert f"USER {IMAGE_UID}:{IMAGE_UID}" in text
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert "deploy/secrets" in ignored and ".git" in ignored


def test_the_entrypoint_reads_the_secrets_files(tmp_path):
    """deploy/entrypoint.sh: NAME_FILE=path gives the command NAME=the file's content; an
    unreadable file stops it before autograder runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "autograder"
    stub.write_text('#!/bin/sh\nprintf "%s|%s|%s" "$PGPASSWORD" "$AUTOGRADER_SERVE_METRICS_TOKEN" "$*"\n')
    stub.chmod(0o755)
    (tmp_path / "pg").write_text("s3cret\n", encoding="utf-8")
    (tmp_path / "metrics").write_text("t0ken", encoding="utf-8")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PGPASSWORD_FILE": str(tmp_path / "pg"),
        "AUTOGRADER_SERVE_METRICS_TOKEN_FILE": str(tmp_path / "metrics"),
    }
    entrypoint = str(DEPLOY / "entrypoint.sh")
    ran = subprocess.run(
        [entrypoint, "staff", "add", "ana"], env=env, capture_output=True, text=True, timeout=30
    )
    assert (ran.returncode, ran.stdout) == (0, "s3cret|t0ken|staff add ana")
    env["PGPASSWORD_FILE"] = str(tmp_path / "absent")
    ran = subprocess.run([entrypoint, "serve"], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode != 0 and ran.stdout == "" and "absent" in ran.stderr
    assert os.access(entrypoint, os.X_OK)  # git keeps the mode: the image runs it as is


def test_the_readme_explains_the_large_course_setup_in_both_languages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## El servicio para un curso grande\n")
    spanish = readme[start : readme.index("\n## ", start + 1)]
    start = readme.index("**Running the service for a large course.**")
    english = readme[start : readme.index("\n\n", start)]
    for text in (spanish, english):
        flat = " ".join(text.split())
        for needle in (
            "--workers 0",
            "autograder worker",
            "PostgreSQL",
            "Redis",
            "deploy/compose.yaml",
            "grade-all-shards.yaml",
            "grade-all-merge.yaml",
            "$((JOB_COMPLETION_INDEX + 1))/N",
            "max_parallel",
            "256",
            "500",
            "/staff/",
            "autograder staff add",
            "/healthz",
            "/readyz",
            "/metrics",
            "AUTOGRADER_SERVE_METRICS_TOKEN",
            "isolation",
            '"namespaces": []',
            "Docker",
            "Kubernetes",
            "tests/test_deploy.py",
        ):
            assert needle in flat, needle
        for path in re.findall(r"`(deploy/[^`\s]*)`", text):
            assert (ROOT / path).exists(), path
