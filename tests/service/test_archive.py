"""The bounded archive a submission's files travel in (autograder/service/archive.py), from the
service's fetch to a worker on another machine: what is packed (regular files only, links
skipped, the caps), and that nothing in an archive read back from the database is trusted
(paths that escape, links, devices, too many or too big members, a damaged archive, a sha256
that does not match); and the service's fetcher (archiver.py) giving a fetch that may work later
its attempts, then the submission's error. No servers."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import pytest

from autograder.service.archive import ArchiveError, pack, unpack
from autograder.service.fetch import FetchLimits


def tar_of(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def regular(name: str, data: bytes = b"x", size: int | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data) if size is None else size
    return info, data


def special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def test_the_learners_regular_files_travel_and_come_back_the_same(tmp_path):
    learner = tmp_path / "learner"
    (learner / "exercises" / "01-x").mkdir(parents=True)
    (learner / "exercises" / "01-x" / "model.py").write_text("x = 1\n", encoding="utf-8")
    (learner / "README.md").write_bytes(b"\x00\xffbin")
    os.symlink("/etc/passwd", learner / "exercises" / "link.py")  # fetch never writes one; skipped anyway
    packed = pack(learner)
    assert packed.size == len(packed.data) and len(packed.sha256) == 64
    assert pack(learner).data == packed.data  # the same files, the same archive (no times, owners)
    out = unpack(packed.data, tmp_path / "w", sha256=packed.sha256)
    got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert got == {"exercises/01-x/model.py": b"x = 1\n", "README.md": b"\x00\xffbin"}
    assert not (out / "exercises" / "link.py").exists()


def test_packing_refuses_more_files_or_bytes_than_the_limits(tmp_path):
    for n in range(3):
        (tmp_path / f"{n}.py").write_bytes(b"a" * 100)
    with pytest.raises(ArchiveError) as many:
        pack(tmp_path, FetchLimits(files=2))
    assert many.value.text.key == "service.archive.too_many_files"
    with pytest.raises(ArchiveError) as big:
        pack(tmp_path, FetchLimits(bytes=250))
    assert big.value.text.key == "service.archive.too_big"


@pytest.mark.parametrize(
    "name",
    ["../escape.py", "/etc/cron.d/x", "a/../../b.py", "a//b.py", "./a.py", ".git/config", "x/.GIT/hooks/p"],
)
def test_a_path_that_escapes_or_names_git_is_refused(tmp_path, name):
    with pytest.raises(ArchiveError) as refused:
        unpack(tar_of(regular("ok.py"), regular(name)), tmp_path)
    assert refused.value.text.key == "service.archive.bad_path"
    assert not (tmp_path.parent / "escape.py").exists() and not (tmp_path.parent / "b.py").exists()


def test_links_devices_and_folders_in_an_archive_are_never_written(tmp_path):
    data = tar_of(
        special("exercises", tarfile.SYMTYPE, "/etc"),
        special("hard.py", tarfile.LNKTYPE, "/etc/passwd"),
        special("dev", tarfile.CHRTYPE),
        special("fifo", tarfile.FIFOTYPE),
        special("folder", tarfile.DIRTYPE),
        regular("exercises/ok.py", b"ok"),
    )
    out = unpack(data, tmp_path)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["exercises", "exercises/ok.py"]
    assert not (out / "exercises").is_symlink() and (out / "exercises" / "ok.py").read_bytes() == b"ok"


def test_a_name_twice_or_a_file_where_a_folder_goes_is_refused(tmp_path):
    with pytest.raises(ArchiveError):
        unpack(tar_of(regular("a.py"), regular("a.py")), tmp_path / "1")
    with pytest.raises(ArchiveError):
        unpack(tar_of(regular("a"), regular("a/b.py")), tmp_path / "2")


def test_the_caps_hold_on_the_way_out_and_a_damaged_archive_is_said(tmp_path):
    many = tar_of(*(regular(f"{n}.py") for n in range(4)))
    with pytest.raises(ArchiveError) as refused:
        unpack(many, tmp_path / "1", FetchLimits(files=3))
    assert refused.value.text.key == "service.archive.too_many_files"
    big = tar_of(regular("a.py", b"a" * 600), regular("b.py", b"b" * 600))
    with pytest.raises(ArchiveError) as refused:
        unpack(big, tmp_path / "2", FetchLimits(bytes=1000))
    assert refused.value.text.key == "service.archive.too_big"
    for damaged in (b"not an archive", big[: len(big) // 2]):
        with pytest.raises(ArchiveError) as refused:
            unpack(damaged, tmp_path / f"d{len(damaged)}")
        assert refused.value.text.key == "service.archive.corrupt"
    with pytest.raises(ArchiveError) as refused:
        unpack(big, tmp_path / "3", sha256="0" * 64)
    assert refused.value.text.key == "service.archive.corrupt"
    assert not any(Path(tmp_path / "3").rglob("*.py"))


# ------------------------------------------------------------------------------ the service's fetcher


def test_a_fetch_that_may_work_later_is_tried_again_then_is_the_submissions_error(monkeypatch):
    """The service's fetcher (archiver.py) against a repository git cannot reach (a 5xx refusal:
    it may work later): the attempt is counted and tried again after a pause, and after the last
    the submission's error result says why; nothing became claimable meanwhile."""
    import shutil
    import tempfile
    from datetime import datetime, timezone

    from support.project import ROOT

    from autograder.cohort.outputs import Say
    from autograder.cohort.roster import Allowed
    from autograder.core.manifest import load_course
    from autograder.core.roster import Learner
    from autograder.service import archiver
    from autograder.service.claims import Admitted, Identity
    from autograder.service.store import Store

    monkeypatch.setattr(archiver, "RETRY_S", (0.5,))
    base = Path(tempfile.mkdtemp(prefix="autograder-archiver-test-"))
    os.chmod(base, 0o755)  # git may run as an unprivileged user below it
    store = Store(f"sqlite:///{base / 'servicio.db'}")
    store.create()
    try:
        now = datetime.now(timezone.utc)
        ident = Identity(
            repository_id=1,
            repository="curso/ana",
            repository_owner="curso",
            sha="ab" * 20,
            ref="refs/heads/main",
            event_name="push",
            run_id=1,
            run_attempt=1,
            issued_at=now,
            token_id="jti-1",
            actor="ana",
        )

        class When:
            at, source = now, "run"

        submission, _ = store.record(
            admitted=Admitted(ident, Learner("ana", repository_id=1)), submitted=When(), received_at=now
        )
        course = load_course(ROOT / "course.yml")
        fetcher = archiver.Archiver(
            archiver.ArchiverConfig(
                data_dir=base,
                url_template=f"file://{base}/nowhere/{{repository}}.git",
                allowed=Allowed(schemes=("file",), hosts=()),
                max_attempts=2,
            ),
            store,
            course,
            [course.lesson("01")],
            "hash",
            None,
            Say("es"),
        )
        assert fetcher.fetch_one("f") and store.get(submission.id).attempts == 1
        assert store.get(submission.id).state == "queued" and store.claim("w", 30) is None
        assert not fetcher.fetch_one("f")  # not before the pause
        time.sleep(0.6)
        assert fetcher.fetch_one("f")
        final, result = store.get(submission.id), store.result(submission.id)
        assert (final.state, final.attempts, result.error) == ("error", 2, "service.worker.fetch_failed")
        assert "no_repository" not in result.result_json and "curso/ana" in result.result_json
        assert store.archive(submission.id) is None
    finally:
        store.close()
        shutil.rmtree(base, ignore_errors=True)
