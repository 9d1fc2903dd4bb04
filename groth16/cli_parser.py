"""The `zkqueue` command line's argparse classes (groth16/cli.py's new_parser builds on them).

A module of their own so that groth16/cli.py imports no argparse: a plain `zkqueue prove`
(groth16.cli.parse_plain_prove) runs without argparse, its gettext and locale, and the
building of every subcommand's parser, several ms of a one-shot process's start-up.
"""

from __future__ import annotations

import argparse
import os
import sys


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, as wide as the terminal (80 columns when stdout is none) without
    importing shutil (and bz2, lzma, fnmatch with it) as argparse's own does: add_subparsers
    and every add_argument make one even when no help is printed. ($COLUMNS, which shutil
    would read, is not: settings come from zkqueue.config.)"""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None):
        if width is None:
            try:
                width = os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
            except (AttributeError, ValueError, OSError):
                width = 78
        super().__init__(prog, indent_increment, max_help_position, max(width, 40))


class Parser(argparse.ArgumentParser):
    """An ArgumentParser with HelpFormatter; its subcommands' parsers are Parsers too
    (add_subparsers makes them of the parent's class), and argparse makes a formatter for
    every add_argument."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
