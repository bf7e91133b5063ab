"""The roster: one schema, YAML canonical and CSV as a second encoding of the
same learners; every bad roster names the file, the line and the field; ids and e-mails a
spreadsheet would read as a formula are refused; `update` keeps the instructor's comments and
layout; and grade-all reads a YAML roster and fetches from it (real git over HTTP from a bare
repository)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from support.cohort_factory import GIT, push, served

from autograder.cohort.roster import Allowed, fetch, read_roster
from autograder.cohort.roster import RosterError as CohortRosterError
from autograder.core import i18n, roster, roster_update
from autograder.core.roster import RosterError

YAML_ROSTER = """\
# Cohorte de otoño: ¡no borres los comentarios!
version: 1
organization: curso-tdc
template: curso-tdc/plantilla
repository_prefix: tdc-

learners:
  - id: ana          # delegada
    name: Ana García López
    email: ana@example.org
    github: ana-garcia

  - id: beto
    first_name: Beto
    last_name: Ruiz Gil
    github: Beto-R
    repository: otra-org/beto-curso
    repository_id: 4242
    ref: entrega-1

  - id: carla
    url: https://gitlab.example.org/carla/curso.git
"""

# The same learners as a CSV, with grade-all's older column names and a repository column
# holding both an OWNER/NAME and a git URL (told apart by shape).
CSV_ROSTER = """\
Student_ID,Name,First_Name,Last_Name,Email,GitHub,Repository,Repository_ID,Ref
ana,Ana García López,,,ana@example.org,ana-garcia,,,
beto,,Beto,Ruiz Gil,,Beto-R,otra-org/beto-curso,4242,entrega-1
carla,,,,,,https://gitlab.example.org/carla/curso.git,,
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def error_text(path: Path, lang: str = "es") -> str:
    with pytest.raises(RosterError) as info:
        roster.load(path)
    return i18n.localize(info.value.text, lang)


# ------------------------------------------------------------------ the model


def test_yaml_and_csv_give_the_same_learners(tmp_path):
    from_yaml = roster.load(write(tmp_path, "roster.yml", YAML_ROSTER))
    from_csv = roster.load(write(tmp_path, "roster.csv", CSV_ROSTER))
    assert [learner.fields() for learner in from_yaml.learners] == [
        learner.fields() for learner in from_csv.learners
    ]
    assert from_yaml.learners == from_csv.learners  # line numbers aside
    assert [learner.line for learner in from_yaml.learners] == [8, 13, 21]
    assert [learner.line for learner in from_csv.learners] == [2, 3, 4]
    assert (from_yaml.encoding, from_csv.encoding) == ("yaml", "csv")
    assert from_csv.csv_url_in_repository and not from_yaml.csv_url_in_repository

    ana, beto, carla = from_yaml.learners
    assert ana.names == ("Ana", "García López") and beto.names == ("Beto", "Ruiz Gil")
    # Defaults: {organization}/{prefix}{github}, and GitHub's HTTPS URL of the repository.
    assert from_yaml.repository(ana) == "curso-tdc/tdc-ana-garcia"
    assert from_yaml.url(ana) == "https://github.com/curso-tdc/tdc-ana-garcia.git"
    assert from_yaml.repository(beto) == "otra-org/beto-curso" and beto.repository_id == 4242
    assert from_yaml.url(beto) == "https://github.com/otra-org/beto-curso.git"
    assert from_yaml.repository(carla) is None and from_yaml.url(carla) == carla.url
    # A CSV roster has no course-level keys: no organization, so no default repository.
    assert from_csv.repository(from_csv.learners[0]) is None


def test_the_learner_id_rule_lives_in_the_schema():
    for good in ("ana", "ana.garcia", "ana+1", "ana@uni", "José", "12345"):
        assert roster.valid_learner_id(good), good
    for bad in ("", ".ana", "-ana", "_ana", "ana garcía", "ana/..", "ana\n", "a" * 129):
        assert not roster.valid_learner_id(bad), bad


# ------------------------------------------------------------------ bad rosters

LEARNER = "version: 1\nlearners:\n  - id: ana\n"
BAD_YAML = [
    # (text, line, what the message must say)
    ("version: 2\nlearners: []\n", 1, "versión «2» desconocida; este autograder lee la versión 1"),
    ("learners:\n  - id: ana\n", 1, "falta el campo obligatorio «version»"),
    ("version: 1\norganisation: x\nlearners: []\n", 2, "el campo «organisation» no existe"),
    (
        LEARNER + "    emial: ana@example.org\n",
        4,
        "el campo «emial» no existe (¿una errata?). Campos válidos: id, name",
    ),
    ("version: 1\nlearners:\n  - name: Ana\n", 3, "falta el campo obligatorio «id»"),
    ("version: 1\nlearners:\n  - id: ana\n  - id: beto\n  - id: ana\n", 5, "el id «ana» aparece dos veces"),
    (
        "version: 1\nlearners:\n  - id: ana\n    github: a1\n  - id: beto\n    github: A1\n",
        6,
        "github «A1» ya lo tiene el alumno de la línea 4",
    ),
    (
        "version: 1\nlearners:\n  - id: ana\n    repository_id: 7\n  - id: beto\n    repository_id: 7\n",
        6,
        "repository_id «7» ya lo tiene el alumno de la línea 4",
    ),
    (LEARNER + "    github: -ana\n", 4, "el campo github no admite «-ana»: un usuario de GitHub"),
    (LEARNER + "    repository: https://github.com/a/b.git\n", 4, "una url de git va en el campo url"),
    (LEARNER + "    repository_id: abc\n", 4, "el campo repository_id no admite «abc»"),
    (LEARNER + "    ref: --upload-pack=touch\n", 4, "la columna ref no puede empezar por un guion"),
    (LEARNER + "    name: Ana\n    first_name: Ana\n", 3, "da name o bien first_name y last_name, no ambos"),
    (LEARNER + "    github: ana\n    github: otra\n", 5, "el campo «github» aparece dos veces"),
    ("version: 1\nlearners:\n  - id: ana\n   github: ana\n", 4, "no es YAML válido"),
    ("version: 1\nlearners:\n  - id: ana garcía\n", 3, "«ana garcía» no sirve como id de alumno"),
    ("version: 1\nlearners: ana\n", 2, "el campo learners no admite «ana»: una lista de alumnos"),
    ("- ana\n- beto\n", 1, "un diccionario con «version: 1» y «learners:»"),
]


@pytest.mark.parametrize("text, line, expected", BAD_YAML, ids=[str(i) for i in range(len(BAD_YAML))])
def test_each_bad_yaml_roster_names_the_file_the_line_and_the_field(tmp_path, text, line, expected):
    path = write(tmp_path, "roster.yml", text)
    message = error_text(path)
    assert message.startswith(f"{path}:{line}: "), message
    assert expected in message, message


BAD_CSV = [
    ("id,name,emial\nana,Ana,a@b.org\n", 1, "el campo «emial» no existe"),
    ("name,email\nAna,a@b.org\n", 1, "a la cabecera le falta la columna id"),
    ("id,name\nana,Ana\nbeto,Beto,extra\n", 3, "la fila tiene más celdas que columnas"),
    ("id,github\nana,ana\n\nbeto,-beto\n", 4, "el campo github no admite «-beto»"),
    ("id,repository_id\nana,12x\n", 2, "el campo repository_id no admite «12x»"),
    (
        "id,url,git_url\nana,https://github.com/a/b.git,https://github.com/a/c.git\n",
        2,
        "el campo «url» aparece dos veces",
    ),
    ("", None, "la lista de alumnos está vacía"),
]


@pytest.mark.parametrize("text, line, expected", BAD_CSV, ids=[str(i) for i in range(len(BAD_CSV))])
def test_each_bad_csv_roster_names_the_file_the_line_and_the_field(tmp_path, text, line, expected):
    path = write(tmp_path, "roster.csv", text)
    message = error_text(path)
    assert message.startswith(f"{path}:{line}: " if line else f"{path}: "), message
    assert expected in message, message


@pytest.mark.parametrize("value", ['=HYPERLINK("http://x")', "+1-555", "-2+3", "@SUM(A1)", "\tana", "\rana"])
def test_formula_like_ids_and_emails_are_refused_naming_the_line(tmp_path, value):
    quoted = yaml.safe_dump(value).strip().removesuffix("...").strip()
    for field in ("id", "email"):
        extra = "" if field == "id" else "    email: " + quoted + "\n"
        ident = quoted if field == "id" else "ana"
        path = write(tmp_path, "roster.yml", f"version: 1\nlearners:\n  - id: beto\n  - id: {ident}\n{extra}")
        message = error_text(path)
        line = 4 if field == "id" else 5
        assert message.startswith(f"{path}:{line}: el campo {field} ("), message
        assert "hoja de cálculo lo leería como una fórmula" in message
        cell = '"' + value.replace('"', '""') + '"'
        path = write(
            tmp_path,
            "roster.csv",
            f"id,email\nbeto,\n{cell if field == 'id' else 'ana'},{cell if field == 'email' else ''}\n",
        )
        message = error_text(path, "en")
        assert message.startswith(f"{path}:3: the {field} field ("), message
        assert "a spreadsheet would read it as a formula" in message


def test_a_negative_number_is_not_a_formula_but_still_no_id(tmp_path):
    path = write(tmp_path, "roster.csv", "id\n-3\n")
    assert error_text(path).startswith(f"{path}:2: «-3» no sirve como id de alumno")


# ------------------------------------------------------------------ writing


def test_update_keeps_comments_and_layout_and_is_atomic(tmp_path):
    path = write(tmp_path, "roster.yml", YAML_ROSTER)
    assert roster_update.update(path, "ana", repository="curso-tdc/tdc-ana-garcia", repository_id=7) is True
    text = path.read_text(encoding="utf-8")
    assert text == YAML_ROSTER.replace(
        "    github: ana-garcia\n",
        "    github: ana-garcia\n    repository: curso-tdc/tdc-ana-garcia\n    repository_id: 7\n",
    )
    # A value already there is replaced in place (a renamed repository).
    assert roster_update.update(path, "beto", repository="otra-org/beto-2026", repository_id=4242) is True
    assert path.read_text(encoding="utf-8") == text.replace("otra-org/beto-curso", "otra-org/beto-2026")
    # The last learner of the file, at its very end and without a final newline.
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    assert roster_update.update(path, "carla", repository_id=99) is True
    assert path.read_text(encoding="utf-8").endswith("curso.git\n    repository_id: 99\n")
    # Nothing to change: the file is not touched, byte for byte.
    before = path.read_bytes()
    assert roster_update.update(path, "carla", repository_id=99) is None and path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["roster.yml"]  # no temporary file left
    reread = roster.load(path)
    assert reread.learner("ana").repository_id == 7 and reread.learner("carla").repository_id == 99


def test_update_falls_back_to_a_full_dump_where_the_layout_does_not_allow_an_edit(tmp_path):
    path = write(tmp_path, "roster.yml", "# comentario\nversion: 1\nlearners:\n  - {id: ana, github: ana}\n")
    assert roster_update.update(path, "ana", repository="o/tdc-ana", repository_id=3) is False
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data == {
        "version": 1,
        "learners": [{"id": "ana", "github": "ana", "repository": "o/tdc-ana", "repository_id": 3}],
    }


def test_update_writes_a_csv_roster_with_new_columns_last(tmp_path):
    path = write(
        tmp_path, "roster.csv", '\ufeffid,name,github\r\nana,"García, Ana",ana\r\nbeto,Beto,beto\r\n'
    )
    assert roster_update.update(path, "beto", repository="o/tdc-beto", repository_id=12) is True
    assert path.read_bytes().decode("utf-8") == (
        "\ufeffid,name,github,repository,repository_id\r\n"
        'ana,"García, Ana",ana,,\r\n'
        "beto,Beto,beto,o/tdc-beto,12\r\n"
    )
    assert roster.load(path).learner("beto").repository_id == 12


def test_update_keeps_a_carriage_return_inside_its_cell(tmp_path):
    """With \n line ends the csv module leaves a bare CR unquoted; the row holding one is quoted
    in full, so the next reader still sees two learners and the same name."""
    path = write(tmp_path, "roster.csv", 'id,name,github\nana,"Ana\r@SUM(1)",ana\nbeto,Beto,beto\n')
    assert roster.load(path).learner("ana").name == "Ana\r@SUM(1)"
    assert roster_update.update(path, "beto", repository_id=12) is True
    again = roster.load(path)
    assert [learner.id for learner in again.learners] == ["ana", "beto"]
    assert again.learner("ana").name == "Ana\r@SUM(1)" and again.learner("beto").repository_id == 12


# ------------------------------------------------------------------ grade-all reads YAML


def test_grade_all_reads_a_yaml_roster_and_fetches_from_it(tmp_path):
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    bare = remotes / "ana.git"
    subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
    work = remotes / "ana-work"
    subprocess.run([*GIT, "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    (work / "exercises").mkdir()
    (work / "exercises" / "hola.py").write_text("print('hola')\n", encoding="utf-8")
    subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "uno"], cwd=work, check=True)
    push(work, "HEAD:main")
    head = subprocess.run(
        [*GIT, "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True
    ).stdout.strip()
    submissions = tmp_path / "submissions"
    with served(remotes) as base:
        path = write(
            tmp_path,
            "roster.yml",
            f"""\
version: 1
organization: curso-tdc
learners:
  - id: ana
    name: Ana García López
    email: ana@example.org
    url: {base}/ana.git
  - id: beto
    github: beto-r
""",
        )
        local = Allowed(("http", "https"), ("127.0.0.1", "github.com"))
        ana, beto = read_roster(path, submissions, local)
        assert (ana.id, ana.first_name, ana.last_name, ana.email, ana.url) == (
            "ana",
            "Ana",
            "García López",
            "ana@example.org",
            f"{base}/ana.git",
        )
        assert beto.url == "https://github.com/curso-tdc/beto-r.git" and beto.folder == submissions / "beto"
        fetch(ana, local)
        assert ana.problem is None and ana.commit == head
        assert (submissions / "ana" / "exercises" / "hola.py").read_text(
            encoding="utf-8"
        ) == "print('hola')\n"

    # The URLs grade-all allows are checked on the derived URL too; a learner with no way to a
    # repository is an error naming the line.
    with pytest.raises(CohortRosterError) as info:
        read_roster(path, submissions, Allowed(("https",), ("gitlab.example.org",)))
    assert i18n.localize(info.value.text, "es").startswith(f"{path}:4: «{base}/ana.git» usa http")
    lost = write(tmp_path, "lost.yml", "version: 1\nlearners:\n  - id: ana\n    github: ana\n")
    with pytest.raises(CohortRosterError) as info:
        read_roster(lost, submissions)
    assert i18n.localize(info.value.text, "es") == f"{lost}:3: el alumno «ana» no tiene url de repositorio."
