"""The command line's language: which one it speaks, and argparse speaking it.

    cli_language(argv) -> lang       --lang, over $AUTOGRADER_LANG, over course.yml, over Spanish
    parser_class(lang)               the ArgumentParser whose usage errors say it in `lang`
    localize(parser, lang)           every catalog Text of a parser tree (help, metavars) in `lang`
    argparse_language(lang)          argparse's own words ("usage:", "options", its errors) in `lang`
    usage_error_line(prog, text, lang)   the one line argparse prints for a usage error

Every text comes from the catalogs (messages/<lang>/cli.yml). Nothing here knows a command:
they add their arguments with catalog Texts (autograder.core.results.message), and a choice that
existed once names its catalog key in the action's `retired` mapping.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import ManifestError, find_course_file
from autograder.core.results import Text

LANG_ENV_VAR = "AUTOGRADER_LANG"

# argparse's own words, which it takes from gettext (no Spanish catalog exists for them):
# its English text -> our catalog key.
ARGPARSE_WORDS = {
    "usage: ": "cli.argparse.usage",
    "positional arguments": "cli.argparse.positionals",
    "options": "cli.argparse.options",
    "show this help message and exit": "cli.argparse.help",
    "argument %(argument_name)s: %(message)s": "cli.argparse.argument",
    "unrecognized arguments: %s": "cli.argparse.unrecognized",
    "the following arguments are required: %s": "cli.argparse.required",
    "one of the arguments %s is required": "cli.argparse.one_of_required",
    "expected one argument": "cli.argparse.expected_one",
    "expected at most one argument": "cli.argparse.expected_at_most_one",
    "expected at least one argument": "cli.argparse.expected_at_least_one",
    "ambiguous option: %(option)s could match %(matches)s": "cli.argparse.ambiguous",
    "invalid %(type)s value: %(value)r": "cli.argparse.invalid_value",
    "invalid choice: %(value)r (choose from %(choices)s)": "cli.argparse.invalid_choice",
    "not allowed with argument %s": "cli.argparse.not_allowed",
    "ignored explicit argument %r": "cli.argparse.ignored_explicit",
    "can't open '%(filename)s': %(error)s": "cli.argparse.cannot_open",
    "unexpected option string: %s": "cli.argparse.unexpected_option",
    "%(prog)s: error: %(message)s\n": "cli.argparse.error",
    # Our own argument types' errors, raised while parsing: looked up the same way.
    "%r is not a port number (0-65535)": "cli.argparse.bad_port",
}


# --- which language ----------------------------------------------------------------------------


def cli_language(argv: list[str], environ=os.environ) -> str:
    """The language of the command line's text: --lang in argv, else $AUTOGRADER_LANG, else the
    course's `language`, else Spanish. Read before parsing (help is printed while parsing), from
    the raw arguments and a cheap look at course.yml, so --help never waits on the validation of
    the manifest and still speaks the course language when course.yml is broken."""
    for index, arg in enumerate(argv):
        value = argv[index + 1] if arg == "--lang" and index + 1 < len(argv) else arg.partition("=")[2]
        if (arg == "--lang" or arg.startswith("--lang=")) and value in i18n.LANGUAGES:
            return value
    env = environ.get(LANG_ENV_VAR, "").strip()
    if env in i18n.LANGUAGES:
        return env
    return _course_language(argv) or i18n.DEFAULT_LANGUAGE


def _course_language(argv: list[str]) -> str | None:
    path = None
    for index, arg in enumerate(argv):
        if arg == "--course" and index + 1 < len(argv):
            path = argv[index + 1]
        elif arg.startswith("--course="):
            path = arg.partition("=")[2]
    try:
        text = (
            Path(path).read_text(encoding="utf-8") if path else find_course_file().read_text(encoding="utf-8")
        )
    except (OSError, UnicodeDecodeError, ManifestError):
        return None
    found = re.search(r"^language:[ \t]*[\"']?([a-z]+)", text, re.MULTILINE)
    return found.group(1) if found and found.group(1) in i18n.LANGUAGES else None


def env_language_warning(environ, lang: str) -> str | None:
    """A one-line warning for an $AUTOGRADER_LANG that names no language of the course."""
    value = environ.get(LANG_ENV_VAR, "").strip()
    if not value or value in i18n.LANGUAGES:
        return None
    return i18n.translate(
        "cli.bad_env_lang", lang, value=value, languages=", ".join(i18n.LANGUAGES), lang=lang
    )


# --- argparse in that language -----------------------------------------------------------------


@contextlib.contextmanager
def argparse_language(lang: str) -> Iterator[None]:
    """argparse's words ("usage:", "options", its errors) in `lang` while the block runs: they
    are looked up through argparse's module-level gettext aliases, which this swaps and restores."""
    words = i18n.catalog(lang)

    def gettext(text):
        key = ARGPARSE_WORDS.get(text)
        return words.get(key, text) if key else text

    def ngettext(singular, plural, n):
        if singular == "expected %s argument":  # nargs=N
            return (
                gettext("expected one argument") if n == 1 else words.get("cli.argparse.expected_n", plural)
            )
        return singular if n == 1 else plural

    saved = argparse._, argparse.ngettext
    argparse._, argparse.ngettext = gettext, ngettext
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved


def usage_error_line(prog: str, text: str, lang: str) -> str:
    """The same "prog: error: ..." line argparse prints for its own usage errors."""
    return i18n.catalog(lang)["cli.argparse.error"].rstrip("\n") % {"prog": prog, "message": text}


class _Parser(argparse.ArgumentParser):
    """argparse with our usage errors: an unknown choice says which one was probably meant, and
    a retired one says why it went: an action's `retired` maps such a value to a catalog key,
    whose text gets the value and the choices that remain ({value}, {formats})."""

    lang = i18n.DEFAULT_LANGUAGE  # each language has its own subclass: see parser_class

    def _check_value(self, action, value):
        if action.choices is None or value in action.choices:
            return
        retired = getattr(action, "retired", {})
        if value in retired:
            remaining = ", ".join(sorted(str(choice) for choice in action.choices))
            raise argparse.ArgumentError(
                action, i18n.translate(retired[value], self.lang, value=value, formats=remaining)
            )
        choices = [str(choice) for choice in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
        if isinstance(action, argparse._SubParsersAction):
            text = i18n.translate(
                "cli.unknown_command_close" if close else "cli.unknown_command",
                self.lang,
                value=value,
                close=close[0] if close else "",
                commands=", ".join(choices),
            )
            raise argparse.ArgumentError(None, text)  # no "argument ORDEN:" before it
        text = i18n.translate(
            "cli.invalid_choice_close" if close else "cli.invalid_choice",
            self.lang,
            value=value,
            close=close[0] if close else "",
            choices=", ".join(choices),
        )
        raise argparse.ArgumentError(action, text)


@functools.cache
def parser_class(lang: str) -> type[argparse.ArgumentParser]:
    # A class, not an instance attribute: argparse builds sub-command parsers from type(parent).
    return type(f"_Parser_{lang}", (_Parser,), {"lang": lang})


def localize(parser: argparse.ArgumentParser, lang: str) -> None:
    """Every catalog `Text` in the parser tree (descriptions, help, metavars) as `lang` text."""
    parser.description = _plain(parser.description, lang)
    parser.epilog = _plain(parser.epilog, lang)
    for action in parser._actions:
        action.help = _help(action.help, lang)
        action.metavar = _plain(action.metavar, lang)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = _help(choice.help, lang)
            for subparser in set(action.choices.values()):
                localize(subparser, lang)


def _plain(value, lang: str):
    return i18n.localize(value, lang) if isinstance(value, Text) else value


def _help(value, lang: str):
    # argparse %-formats help strings (for %(default)s); a catalog's "%" is a plain percent sign.
    return i18n.localize(value, lang).replace("%", "%%") if isinstance(value, Text) else value
