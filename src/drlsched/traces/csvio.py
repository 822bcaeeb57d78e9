"""Streaming row readers shared by the trace formats: gzip by magic bytes, typed columns, bad-row policy.

Rows are parsed by the C `csv` reader and converted column by column; a row that fails is re-checked column by
column only then, so the common path stays cheap while the error still names file, line and column.
Files are UTF-8 (a leading byte-order mark is dropped). Bytes that are not UTF-8 and damaged or truncated gzip
data stop the read with one line naming the file and where (located by a second, slow pass only then); a row
the C reader refuses (a field over `csv.field_size_limit`) is a malformed row like any other.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from drlsched.errors import UserError

Parse = Callable[[str], Any]


_DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile)  # what gzip raises on truncated or corrupt data


def open_binary(path: Path) -> IO[bytes]:
    """Opens a file for reading, decompressing gzip whatever the file is called (traces are often re-zipped)."""
    try:
        raw = path.open("rb")
        if raw.peek(2)[:2] == b"\x1f\x8b":
            # GzipFile does not close a file object it was given: hand it the path so closing closes the file.
            raw.close()
            return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    except OSError as err:
        raise UserError(f"cannot read trace file {path}: {err.strerror or err}") from err
    return raw


def open_text(path: Path) -> IO[str]:
    """`open_binary` decoded as UTF-8; a byte-order mark before the first line is dropped."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", newline="")


@contextmanager
def decoding(path: Path, lines_read: Callable[[], int]) -> Iterator[None]:
    """Turns the errors of reading `path` as text into one-line `UserError`s; `lines_read` tells how far the
    reader got (the line of a damaged gzip stream)."""
    try:
        yield
    except UnicodeDecodeError:
        raise UserError(_undecodable(path)) from None
    except _DAMAGED as err:
        raise UserError(f"{path}: compressed data damaged or truncated after line {lines_read()} "
                        f"({err or type(err).__name__})") from None
    except OSError as err:
        raise UserError(f"cannot read trace file {path} after line {lines_read()}: {err.strerror or err}") from None


def _undecodable(path: Path) -> str:
    """Where the first byte that is not UTF-8 lies: re-reads the file line by line (the error path only)."""
    offset = 0
    with open_binary(path) as raw:
        try:
            for number, line in enumerate(raw, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as err:
                    byte = line[err.start]
                    where = "uncompressed byte" if isinstance(raw, gzip.GzipFile) else "byte"
                    return (f"{path}:{number}: {where} {offset + err.start} (0x{byte:02x}) is not UTF-8; traces "
                            f"must be UTF-8 text (convert with e.g. iconv -f latin1 -t utf-8)")
                offset += len(line)
        except _DAMAGED as err:
            return f"{path}: compressed data damaged or truncated at uncompressed byte {offset} ({err})"
    return f"{path}: not UTF-8 text"


# Column parsers: each raises ValueError with a short reason; the reader adds the location.

def text(value: str) -> str:
    return value


def required(value: str) -> str:
    if not value:
        raise ValueError("empty value")
    return value


def number(value: str) -> float:
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"not a finite number: {value!r}")
    return result


def optional_number(value: str) -> float | None:
    """Empty, or `nan` as pandas writes a missing value, is None."""
    return None if not value or value.lower() == "nan" else number(value)


def integer(value: str) -> int:
    """Integers; the Alibaba tables write some counts as `12846.0`, so integral floats are accepted."""
    try:
        return int(value)
    except ValueError:
        result = number(value)
        if result != int(result):
            raise ValueError(f"not an integer: {value!r}") from None
        return int(result)


def optional_integer(value: str) -> int | None:
    return integer(value) if value else None


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    parse: Parse


@dataclass
class BadRows:
    """Counts malformed rows when skipping is allowed, else turns the first one into a UserError.

    The count lives in the workload's `info` dict so that it is visible while pods stream.
    """

    skip: bool
    info: dict[str, object] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return int(self.info.get("bad_rows", 0))  # type: ignore[call-overload]

    def report(self, path: Path, line: int, column: str, reason: str) -> None:
        self.reject(f"{path}:{line}: column {column}: {reason}")

    def reject(self, message: str, rows: int = 1) -> None:
        """`rows` rows that `message` (location: reason) describes are bad: an error, or counted when skipping."""
        if not self.skip:
            raise UserError(f"malformed row at {message} (use --skip-bad-rows to skip such rows)")
        self.info.setdefault("first_bad_row", message)
        self.info["bad_rows"] = self.count + rows


def _locate(path: Path, line: int, row: Sequence[str], columns: Sequence[Column],
            bad: BadRows) -> None:
    for position, (column, value) in enumerate(zip(columns, row, strict=False), start=1):
        try:
            column.parse(value)
        except ValueError as err:
            bad.report(path, line, f"{position} ({column.name})", f"{err} (value {value!r})")
            return
    bad.report(path, line, "?", "unparseable row")


def read_csv(path: Path, columns: Sequence[Column], bad: BadRows, header: Sequence[str] | None = None,
             extra_ok: bool = False) -> Iterator[tuple[int, list[Any]]]:
    """Yields (line number, converted values) per data row.

    `header`: the expected header row (the file must start with it; columns are then picked by name, so a
    reordered file still reads right). `extra_ok`: rows may carry more columns than declared (ignored).
    """
    with open_text(path) as handle, decoding(path, lambda: reader.line_num):
        reader = csv.reader(handle)
        order: list[int] | None = None
        if header is not None:
            first = _next_row(reader, path, bad)
            if first is None:
                raise UserError(f"{path}: empty file; expected the header {','.join(header)}")
            names = [name.strip() for name in first]
            missing = [name for name in header if name not in names]
            if missing:
                raise UserError(f"{path}:1: header lacks column(s) {', '.join(missing)}; expected "
                                f"{','.join(header)}")
            order = [names.index(column.name) for column in columns]
        width = len(columns) if order is None else len(first)
        parsers = [column.parse for column in columns]
        while True:
            try:  # inline, not `_next_row`: this loop runs once per row of the largest traces
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as err:
                bad.report(path, reader.line_num, "?", str(err))
                continue
            line = reader.line_num
            if not row:
                continue
            if len(row) != width and not (extra_ok and len(row) > width):
                bad.report(path, line, str(min(len(row), width) + 1),
                           f"expected {width} columns, found {len(row)}")
                continue
            picked = row if order is None else [row[i] for i in order]
            try:
                yield line, [parse(value) for parse, value in zip(parsers, picked, strict=False)]
            except ValueError:
                _locate(path, line, picked, columns, bad)


def _next_row(reader: Any, path: Path, bad: BadRows) -> list[str] | None:
    """The next row, None at the end; a row the C reader refuses (a field over its size limit) is a bad row."""
    while True:
        try:
            return next(reader)  # type: ignore[no-any-return]
        except StopIteration:
            return None
        except csv.Error as err:
            bad.report(path, reader.line_num, "?", str(err))


def read_json_lines(path: Path, bad: BadRows) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Yields (line number, object) for a JSON-lines file (the Google 2019 export)."""
    line = 0
    with open_text(path) as handle, decoding(path, lambda: line):
        for line, text_line in enumerate(handle, start=1):
            if not text_line.strip():
                continue
            try:
                record = json.loads(text_line.rstrip("\r\n"))
            except json.JSONDecodeError as err:
                bad.report(path, line, str(err.colno), f"invalid JSON: {err.msg}")
                continue
            if not isinstance(record, dict):
                bad.report(path, line, "1", "expected a JSON object")
                continue
            yield line, record
