"""Reading the files the kit is handed: the gradebook, the stored results, the notebooks `assign` releases and the
autograder's question lists, each through `read`, which refuses a file that cannot be read, is not UTF-8, is empty,
is truncated or malformed, or holds the wrong shape, with one line naming the file and its fault (BadFile: the
command prints it as its one-line error, exit code 2, before anything is written).

A submission is not read here: a student's unreadable notebook costs that student its cases, with the reason on
the feedback page (judge.read_notebook), never the class its grading.
"""

from __future__ import annotations

import configparser
import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
NUMBER = (int, float)


class BadFile(ValueError):
    """A file the kit reads, refused: the message names the file and what is wrong with it."""


def read(path: Path, parse: Callable[[str], T]) -> T:
    """parse(the file's text), or BadFile naming the file: unreadable, not UTF-8, empty (nothing but white space),
    or refused by parse (a ValueError or configparser.Error: not JSON or INI, truncated, the wrong shape)."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise BadFile(f"{path}: cannot be read ({error.strerror or type(error).__name__})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadFile(f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})") from None
    if not text.strip():
        raise BadFile(f"{path}: empty")
    try:
        return parse(text)
    except json.JSONDecodeError as error:
        cut = "truncated: " if error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated") else ""
        fault = f"{error.msg.removesuffix(' at')} at line {error.lineno} column {error.colno}"
        raise BadFile(f"{path}: {cut}not valid JSON ({fault})") from None
    except configparser.Error as error:
        raise BadFile(f"{path}: not INI text ({_ini_fault(error)})") from None
    except ValueError as error:
        raise BadFile(f"{path}: {' '.join(str(error).split())}") from None


def check_shape(value, shape, where: str = "") -> None:
    """Raise ValueError at the first place `value` (parsed JSON) is not of `shape`: a type (None: null), a dict
    {key: shape} (a key ending in '?' may be absent), a one-item list [the shape of each item], or a tuple of
    such shapes, any of which will do."""
    place = where or "the file"
    if isinstance(shape, tuple):
        for alternative in shape:
            try:
                return check_shape(value, alternative, where)
            except ValueError:
                if _matches(value, alternative):  # the right kind, wrong inside: that is the fault to name
                    raise
        raise ValueError(f"{place} must be {' or '.join(dict.fromkeys(map(_shape_name, shape)))}, not {_kind(value)}")
    if not _matches(value, shape):
        raise ValueError(f"{place} must be {_shape_name(shape)}, not {_kind(value)}")
    if isinstance(shape, dict):
        for key, inner in shape.items():
            name = key.rstrip("?")
            if name in value:
                check_shape(value[name], inner, f"{where}.{name}" if where else name)
            elif not key.endswith("?"):
                raise ValueError(f"{place} has no {name!r}")
    elif isinstance(shape, list):
        for i, item in enumerate(value):
            check_shape(item, shape[0], f"{where}[{i}]")


def _matches(value, shape) -> bool:
    """Whether value is of shape's outer kind (an object, an array, a string, ...)."""
    kind = type(shape) if isinstance(shape, (dict, list)) else shape
    return value is None if kind is None else isinstance(value, kind)


def json_of(shape) -> Callable[[str], object]:
    """A parse for `read`: the text as JSON, its shape checked (check_shape)."""

    def parse(text: str):
        value = json.loads(text)
        check_shape(value, shape)
        return value

    return parse


def _ini_fault(error: configparser.Error) -> str:
    """configparser's complaint in one line, without its '<string>' source."""
    if isinstance(error, configparser.MissingSectionHeaderError):
        return f"line {error.lineno} comes before any [section]: {error.line.strip()!r}"
    if isinstance(error, configparser.ParsingError):
        return f"line {error.errors[0][0]} is neither a [section] nor a key = value"
    return " ".join(str(error).replace("While reading from '<string>' ", "").split())


def _shape_name(shape) -> str:
    kind = type(shape) if isinstance(shape, (dict, list)) else shape
    return {None: "null", str: "a string", bool: "true or false", int: "a number", float: "a number",
            dict: "a JSON object", list: "a JSON array"}[kind]


def _kind(value) -> str:
    """What a parsed JSON value is, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return {dict: "a JSON object", list: "a JSON array (a list)", str: "a string"}.get(type(value), "a number")
