"""docs/cli.md's synopses name exactly the options ``livesym <command> --help`` takes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from livesym.cli import build_parser

DOCS = Path(__file__).parent.parent.parent / "docs" / "cli.md"


def subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def synopses() -> dict[str, str]:
    """Each command's synopsis: its ``livesym CMD …`` line in a code block, with the
    indented lines that continue it."""
    found: dict[str, str] = {}
    blocks = re.findall(r"^```\n(.*?)^```", DOCS.read_text(), re.M | re.S)
    for block in blocks:
        command = None
        for line in block.splitlines():
            start = re.match(r"livesym (\w+)\b(.*)", line)
            if start:
                command = start.group(1)
                found[command] = start.group(2)
            elif command and line.startswith(" "):
                found[command] += " " + line.strip()
    return found


def options(p: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    return [tuple(a.option_strings) for a in p._actions if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_the_synopsis_of_each_command_names_every_option_it_takes(command):
    synopsis = synopses().get(command)
    assert synopsis is not None, f"docs/cli.md has no synopsis for {command}"
    taken = options(subparsers()[command])
    named = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", synopsis))
    for strings in taken:
        assert named & set(strings), f"{command}: {strings[-1]} is not in the synopsis"
    known = {s for strings in taken for s in strings}
    assert named <= known, f"{command}: the synopsis names {named - known}, which it lacks"


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_the_synopsis_shows_the_metavars_help_shows(command):
    # `--rate HZ` in the docs and `--rate RATE` in --help would be two names for one thing.
    synopsis = synopses()[command]
    for action in subparsers()[command]._actions:
        if not action.option_strings or action.nargs == 0:
            continue
        metavar = shown_metavar(action)
        names = "|".join(action.option_strings)
        shown = re.findall(rf"(?:{names}) (\S+?)[\])]*(?:\.\.\.)?(?:\s|$)", synopsis)
        assert shown and all(s == metavar for s in shown), (command, metavar, shown)


def shown_metavar(action: argparse.Action) -> str:
    """What --help shows after the option (argparse's own default when none is set)."""
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper()
