"""Small file helpers shared by commands."""

from __future__ import annotations

import codecs
import contextlib
import csv
import errno
import fcntl
import json
import os
import re
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO, TypeVar

from pydantic import BaseModel, ValidationError

from eigenjury.errors import InputError

M = TypeVar("M", bound=BaseModel)


# What an output path may be instead of a regular file, in a user's words.
_SPECIAL_FILES = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
}
# Filesystems without locks (some network or FUSE mounts) answer flock with these.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def output_target(path: Path) -> Path:
    """The file that writing `path` replaces: `path` itself or, through symbolic links,
    the file they lead to (the links stay). A folder, or anything but a regular file (a
    named pipe, a device such as /dev/stdout, a socket), is an InputError: an output is
    written whole beside its target and renamed onto it, which only a file allows."""
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # a new file (or a link to one not yet written)
    except OSError as exc:
        raise InputError(f"cannot write this file ({exc.strerror or exc})", path=path) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError("this is a folder; give the path of a file to write", path=path)
    if mode is not None and not stat.S_ISREG(mode):
        kind = _SPECIAL_FILES.get(stat.S_IFMT(mode), "not a regular file")
        raise InputError(
            f"this is {kind}, not a regular file: eigenjury writes each output whole and "
            "renames it into place, which only a regular file allows; give the path of a file",
            path=path,
        )
    return Path(os.path.realpath(path))


class OutputFile:
    """One output being written, by one process at a time.

    Entering takes an exclusive lock beside the target (`.NAME.lock`, removed on leaving)
    or refuses, naming the process that holds it: two runs writing one file would
    interleave their lines. Under the lock, temporary files that killed writers of this
    target left behind are removed, and the bytes go to a temporary file of a unique
    name beside the target (so that writers on a filesystem without locks still never
    share one); `commit` renames it onto the target, so a reader never sees half a file.
    Leaving without a commit removes the temporary file and any folder entering made.
    `path` may be a symbolic link: the file it leads to is written (output_target).
    `wait`: wait for another writer to finish instead of refusing (for short writes of
    eigenjury's own files, such as a cache)."""

    def __init__(self, path: Path, *, wait: bool = False) -> None:
        self.path = path
        self.target = output_target(path)
        self.tmp = self.target.with_name(f".{self.target.name}.{secrets.token_hex(4)}.tmp")
        self._wait = wait
        self._lock: int | None = None
        self._made: list[Path] = []  # folders this made, deepest first
        self._committed = False

    def __enter__(self) -> OutputFile:
        try:
            self._made = _make_folder(self.target.parent)
            self._lock = self._take_lock()
            if self._lock is not None:  # no other writer: what is there is left over
                _remove_stale(self.target)
            os.close(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except BaseException as exc:
            self._leave()
            if isinstance(exc, OSError):
                raise self.problem(exc) from None
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._leave()

    @contextlib.contextmanager
    def writing(self) -> Iterator[TextIO]:
        """The temporary file, open for text; a failed write names the output."""
        try:
            with self.tmp.open("w", encoding="utf-8") as f:
                yield f
        except OSError as exc:
            raise self.problem(exc) from None

    def write(self, text: str) -> None:
        with self.writing() as f:
            f.write(text)

    def commit(self) -> None:
        """Move the finished temporary file onto the target."""
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:
            raise self.problem(exc) from None
        self._committed = True

    def problem(self, exc: OSError) -> InputError:
        """`exc` as an InputError naming the output (never the temporary file)."""
        return InputError(f"cannot write this file ({exc.strerror or exc})", path=self.path)

    def _lock_path(self) -> Path:
        return self.target.with_name(f".{self.target.name}.lock")

    def _take_lock(self) -> int | None:
        """The locked lock file's descriptor (None where the filesystem has no locks)."""
        lock = self._lock_path()
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if self._wait else fcntl.LOCK_NB))
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                which = f" (pid {holder})" if holder.isdigit() else ""
                raise InputError(
                    f"another eigenjury process{which} is writing this file now; wait for it "
                    "to finish, or give another path",
                    path=self.path,
                ) from None
            except OSError as exc:
                os.close(fd)
                if exc.errno in _NO_LOCKS:
                    return None
                raise
            # its last holder may have removed it between our open and our lock: then
            # the lock is on a file nobody else will open, so take the new one
            try:
                held = os.stat(lock)
            except FileNotFoundError:
                held = None
            mine = os.fstat(fd)
            if held is not None and (held.st_dev, held.st_ino) == (mine.st_dev, mine.st_ino):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
            os.close(fd)

    def _leave(self) -> None:
        if not self._committed:
            _remove(self.tmp)
        if self._lock is not None:
            _remove(self._lock_path())  # removed while still held: see _take_lock
            os.close(self._lock)
            self._lock = None
        if not self._committed:
            for folder in self._made:
                try:
                    folder.rmdir()
                except OSError:
                    break  # something else is in it now
            self._made = []


def _make_folder(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; the ones made, deepest first."""
    missing = []
    place = folder
    while not place.exists() and place != place.parent:
        missing.append(place)
        place = place.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_stale(target: Path) -> None:
    """Remove the temporary files of `target` that killed writers left (its lock held)."""
    left = re.compile(rf"\.{re.escape(target.name)}\.[0-9a-f]{{8}}\.tmp")
    with os.scandir(target.parent) as entries:
        for entry in entries:
            if left.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                _remove(Path(entry.path))


@contextlib.contextmanager
def atomic_writer(path: Path, *, wait: bool = False) -> Iterator[Path]:
    """A temporary file beside `path` for the block to write; it replaces `path` only
    when the block succeeds and is removed on any failure, so a reader never sees a
    half-written file and nothing is left behind (OutputFile: one writer at a time,
    links written through). A folder at `path`, or a place that cannot be written, is an
    InputError naming `path` (never the temporary file)."""
    with OutputFile(path, wait=wait) as out:
        try:
            yield out.tmp
        except OSError as exc:
            raise out.problem(exc) from None
        out.commit()


def _remove(tmp: Path) -> None:
    """Remove our temporary file if it is there (never a folder that took its name)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def open_regular(path: Path) -> BinaryIO:
    """`path` open for reading bytes, if it is a regular file. Anything else (a named
    pipe, a device) is an OSError found without waiting: opening a pipe for reading
    would block until someone writes to it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _SPECIAL_FILES.get(stat.S_IFMT(mode), "not a regular file")
            raise OSError(errno.EINVAL, f"this is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def within(path: Path, folder: Path) -> bool:
    """Whether `path`, every symbolic link on the way followed, lies in `folder` (a
    resolved path)."""
    return Path(os.path.realpath(path)).is_relative_to(folder)


# Names that say "a file": an output folder never takes one (`simulate --out sim.csv`
# made a folder called sim.csv).
FILE_SUFFIXES = frozenset(
    {".csv", ".tsv", ".json", ".jsonl", ".parquet", ".html", ".htm", ".txt", ".md", ".yaml",
     ".yml", ".sqlite", ".db", ".zip", ".gz"}
)  # fmt: skip


def check_output_folder(out: Path, what: str = "--out") -> None:
    """Refuse, before anything is spent, an output folder that cannot be made (a file is
    there or above it) or whose name is a file's (`what` names the setting)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"this is a file; give {what} a folder to write the results in", path=out)
    blocked = blocking_file(out)
    if blocked is not None:
        raise InputError(
            f"the output folder cannot be made: {blocked} is a file; give {what} another folder",
            path=out,
        )
    if not out.exists() and out.suffix.lower() in FILE_SUFFIXES:
        raise InputError(
            f"this names a {out.suffix} file, but the results are a folder of files; give "
            f"{what} a folder name such as {out.with_suffix('')}",
            path=out,
        )


def scratch_file(near: Path) -> BinaryIO:
    """An unnamed temporary file in the nearest existing folder of `near` (an output's:
    on the disk the user chose, not a /tmp that may live in memory), for a run's long
    parts until its outputs are written; gone once closed or the process ends, even by
    kill -9, where the system lets it be unlinked at once (Linux, macOS)."""
    folder = near.absolute()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return tempfile.TemporaryFile(dir=folder)
    except OSError as exc:
        problem = f"cannot write a temporary file here: {exc.strerror}"
        raise InputError(problem, path=folder) from None


def json_output(out: Path, what: str = "--out") -> Path:
    """The path a JSON record is written to: `out` as given when it ends in .json,
    refused when it ends in another format's suffix (FILE_SUFFIXES), else with .json
    added (`fit --out arena-fit` wrote a file without one)."""
    if out.suffix.lower() == ".json" or out.is_dir():
        return out  # (a folder is refused by the output checks, naming it)
    if out.suffix.lower() in FILE_SUFFIXES:
        raise InputError(
            f"this writes a JSON record; give {what} a .json path such as "
            f"{out.with_suffix('.json')}",
            path=out,
        )
    return out.with_name(out.name + ".json")


def blocking_file(folder: Path) -> Path | None:
    """The file at `folder` or above it that keeps the folder from being made, if any
    (found without making anything)."""
    for place in (folder, *folder.parents):
        if place.exists():
            return None if place.is_dir() else place
    return None


def write_text(path: Path, text: str, *, wait: bool = False) -> None:
    """Write atomically: a reader never sees a half-written file (OutputFile)."""
    with OutputFile(path, wait=wait) as out:
        out.write(text)
        out.commit()


def json_text(data: Any) -> str:
    """JSON as eigenjury writes its files: indented, UTF-8 as is."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_json(path: Path, data: Any, *, wait: bool = False) -> None:
    write_text(path, json_text(data), wait=wait)


def validation_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as "field 'x.y': what is wrong"."""
    error = exc.errors()[0]
    if error["type"] == "json_invalid":
        return f"not valid JSON ({error['msg']})"
    field = ".".join(str(part) for part in error["loc"]) or "(line)"
    more = len(exc.errors()) - 1
    extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"field '{field}': {error['msg']}{extra}"


NOT_TEXT = "not UTF-8 text; expected a text file"


def not_text(path: Path) -> InputError:
    """NOT_TEXT at the first byte of `path` that is not UTF-8: its line, and where in it.
    (A decoder reading in blocks cannot say, so the bytes are read again line by line.)"""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return InputError(
                    f"{NOT_TEXT} (byte {exc.start + 1} of the line, 0x{raw[exc.start]:02x}, "
                    "is not UTF-8)",
                    path=path,
                    line=number,
                )
    return InputError(NOT_TEXT, path=path)


def check_file(path: Path) -> None:
    """An InputError naming `path` unless it is a file to read."""
    if path.is_dir():
        raise InputError("this is a folder; give the path of a file", path=path)
    if not path.is_file():
        raise InputError("no such file", path=path)


# Encodings other than UTF-8 that editors save text in: name, bytes per unit, byte-order
# mark, byte order. UTF-32 first: its little-endian mark begins with UTF-16's.
_WIDE_ENCODINGS = (
    ("UTF-32", 4, codecs.BOM_UTF32_LE, "little"),
    ("UTF-32", 4, codecs.BOM_UTF32_BE, "big"),
    ("UTF-16", 2, codecs.BOM_UTF16_LE, "little"),
    ("UTF-16", 2, codecs.BOM_UTF16_BE, "big"),
)
_SNIFF_BYTES = 4096


def check_text_file(path: Path) -> None:
    """An InputError naming `path` unless it is a file to read as UTF-8 text: text in
    UTF-16 or UTF-32, with a byte-order mark or without one, is named as such (without
    a mark its ASCII characters would read as UTF-8 with a NUL after each, and messages
    would print them)."""
    check_file(path)
    with path.open("rb") as f:
        start = f.read(_SNIFF_BYTES)
    encoding = _wide_text(start)
    if encoding is not None:
        raise InputError(
            f"this is {encoding} text; eigenjury reads UTF-8: save it as UTF-8 (in most "
            "editors: Save As, encoding UTF-8)",
            path=path,
        )


def _wide_text(start: bytes) -> str | None:
    """ "UTF-16" or "UTF-32" where the file's first bytes `start` read as such text, else
    None. The files read here are CSV, JSON, YAML and TOML, mostly ASCII punctuation and
    names: so with a byte-order mark, half the characters must be ASCII; without one,
    three in four (a NUL beside most characters is no accident then)."""
    for name, width, mark, order in _WIDE_ENCODINGS:
        marked = start.startswith(mark)
        if not marked and b"\x00" not in start:
            continue
        body = start[len(mark) :] if marked else start
        units = [
            int.from_bytes(body[i : i + width], order)  # type: ignore[arg-type]
            for i in range(0, len(body) - len(body) % width, width)
        ]
        ascii_units = sum(0 < unit < 128 for unit in units)
        if units and ascii_units >= (0.5 if marked else 0.75) * len(units):
            return name
    return None


def read_text(path: Path) -> str:
    """A user's text file, or an InputError naming it (missing, or not UTF-8 text)."""
    check_text_file(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise not_text(path) from None


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of a user's text file."""
    check_text_file(path)
    try:
        with path.open(encoding="utf-8-sig") as f:
            for number, text in enumerate(f, start=1):
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise not_text(path) from None


def read_json_lines(path: Path, *, needs: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file."""
    for number, text in lines(path):
        yield number, json_object(text, path, number, needs=needs)


def read_jsonl(path: Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """(line number, record) for every non-blank line of a JSONL file, each validated as
    `model`; the first bad line is an InputError naming the file, line and field."""
    for number, text in lines(path):
        try:
            yield number, model.model_validate_json(text)
        except ValidationError as exc:
            raise InputError(validation_problem(exc), path=path, line=number) from None


def read_csv(
    path: Path, required: Sequence[str], what: str
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for every non-blank row of a CSV file with a header; missing
    required columns, ragged rows and unreadable CSV are InputErrors naming the line.
    `what` says what such a file needs, for the messages."""
    check_text_file(path)
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = csv_header(reader, path, what)
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(
                f"missing column(s) {', '.join(missing)}; found {', '.join(header) or 'none'}; "
                f"{what}",
                path=path,
                line=1,
            )
        try:
            for fields in reader:
                if not any(x.strip() for x in fields):
                    continue
                if len(fields) != len(header):
                    raise InputError(
                        f"{len(fields)} fields where the header has {len(header)}",
                        path=path,
                        line=reader.line_num,
                    )
                yield reader.line_num, dict(zip(header, fields, strict=True))
        except csv.Error as exc:
            raise InputError(
                f"not readable as CSV ({exc})", path=path, line=reader.line_num
            ) from None
        except UnicodeDecodeError:
            raise not_text(path) from None


def csv_header(reader: Any, path: Path, what: str) -> list[str]:
    """The column names (stripped) on the first line of a CSV file that `reader` reads;
    an empty file or an unreadable first line is an InputError saying what the file
    needs (`what`), and so is a name given to two columns (which of them is meant is
    not clear; columns without a name, as spreadsheets leave at the end, may repeat)."""
    try:
        header = [h.strip() for h in next(reader)]
    except UnicodeDecodeError:
        raise not_text(path) from None
    except StopIteration:
        raise InputError(f"the file is empty; {what}", path=path) from None
    except csv.Error as exc:
        raise InputError(f"not readable as CSV ({exc})", path=path, line=1) from None
    for i, name in enumerate(header):
        if name and name in header[:i]:
            first = header.index(name) + 1
            raise InputError(
                f"two columns are named {name!r} (columns {first} and {i + 1}); which one is "
                "meant is not clear: rename or remove one",
                path=path,
                line=1,
                column=name,
            )
    return header


TOO_DEEP = "nested too deeply to read (more than a few hundred levels of [ or {)"
TOO_LONG_NUMBER = (
    f"holds a whole number of more than {sys.get_int_max_str_digits()} digits, which is "
    "not read; no value in these files needs one"
)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys and values, refusing a key given twice (json keeps the last)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return data


def load_json(text: str, path: Path, line: int | None = None) -> Any:
    """JSON text (a file, or one line of one) as data, or an InputError naming the place.
    An object that gives one key twice is refused: which value is meant is not clear."""
    try:
        return json.loads(text, object_pairs_hook=_distinct_keys)
    except _DuplicateKeyError as exc:
        raise InputError(
            f"the key {exc.key!r} appears twice in one object; which value is meant is not "
            "clear: keep one",
            path=path,
            line=line,
        ) from None
    except json.JSONDecodeError as exc:
        at = f"character {exc.colno}" if line is not None else f"line {exc.lineno}"
        raise InputError(f"not valid JSON ({exc.msg} at {at})", path=path, line=line) from None
    except RecursionError:
        raise InputError(TOO_DEEP, path=path, line=line) from None
    except ValueError:  # a whole number of thousands of digits (Python will not read it)
        raise InputError(TOO_LONG_NUMBER, path=path, line=line) from None


def text_value(value: Any, *, numbers: bool = True) -> str | None:
    """A JSON (or YAML) value as stripped text: a string, or a number written bare where
    `numbers`; None for a list, an object, true/false or null, which str() would turn
    into text nobody wrote."""
    if isinstance(value, str):
        return value.strip()
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def json_kind(value: Any) -> str:
    """What a JSON (or YAML) value is, in a user's words: 'a list', 'an object', ..."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "null"
    return "a number" if isinstance(value, int | float) else "text"


def json_object(text: str, path: Path, line: int, *, needs: str = "") -> dict[str, Any]:
    """One JSONL line as an object, or an InputError naming the file and line."""
    record = load_json(text, path, line)
    if not isinstance(record, dict):
        raise InputError(f"each line must be a JSON object{needs}", path=path, line=line)
    return record


def _holder(fd: int, tries: int = 20) -> str:
    """The pid the lock file's holder wrote, read again for a moment where it has locked
    the file but not yet written it."""
    for _ in range(tries):
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if holder:
            return holder
        time.sleep(0.005)
    return ""
