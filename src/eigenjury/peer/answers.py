"""Answers a user already holds, read as the replies of population members that are
never called: outputs of their own harness, or of a benchmark's.

Formats, told apart by the file's suffix and its first record:

- Arena-Hard-Auto: a folder holding `question.jsonl` (`uid`, `prompt`, `category`) and
  `model_answer/<model>.jsonl` (`uid`, `model`, `messages`, whose assistant `content`
  is text or an object holding `answer`), or one such answer file (its questions from
  `../question.jsonl` where that exists, else from the conversation);
- AlpacaEval: a JSON array (or JSONL) of `{instruction, output, generator, dataset}`;
  the instruction is the question, and its id a hash of it, as AlpacaEval pairs
  outputs by instruction;
- FastChat (MT-Bench, Arena-Hard 0.1): JSONL of `{question_id, model_id, choices:
  [{turns: [...]}]}`, the user turns from a `question.jsonl` beside it;
- a plain table (CSV, JSONL or Parquet) of `question_id, model, answer`, or `messages`
  in place of `answer`, with an optional `question`;
- Inspect AI eval logs (`.eval`, or a `.json` log), read through Inspect's own log
  reader (the `inspect` extra): the log's model is the member, each sample's output
  its answer, questions by sample id (and epoch, where the log has several).

A conversation of more than one exchange is shown to judges in full: the question is
what came before the first assistant turn, the reply everything from it on, each turn
under its speaker's name. Every problem names the file, line (or row) and field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eigenjury.errors import InputError
from eigenjury.files import check_file, json_kind, load_json, read_csv, read_json_lines, read_text
from eigenjury.names import name_problem

ERROR_MARKERS = ("$ERROR$",)  # what Arena-Hard-Auto writes where an API call failed
Kind = Literal["answer", "empty", "error"]
ROLES = ("system", "user", "assistant", "tool")
SPEAKERS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
TABLE_COLUMNS = ("question_id", "model", "answer", "messages", "question")


@dataclass(frozen=True)
class Answer:
    """One given answer: the text judges read, where it was, and whether it is a real
    answer, empty, or a harness's error marker."""

    text: str
    line: int | None
    kind: Kind = "answer"


@dataclass
class AnswerSet:
    """One model's answers in one file: question id -> answer, and the question texts
    the file carries (question id -> text; empty where it carries none)."""

    model: str
    path: Path
    format: str
    answers: dict[str, Answer] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # fields of the file that nothing reads


@dataclass(frozen=True)
class _Where:
    path: Path
    line: int | None = None
    row: int | None = None

    def error(self, message: str, field: str | None = None) -> InputError:
        return InputError(message, path=self.path, line=self.line, row=self.row, field=field)


def question_id_of(instruction: str) -> str:
    """An id for a question known only by its text (AlpacaEval): the same text, the same
    id, in every file."""
    return "q" + hashlib.sha256(instruction.encode()).hexdigest()[:12]


def read_answers(path: Path, *, error_markers: Sequence[str] = ERROR_MARKERS) -> list[AnswerSet]:
    """Every model's answers in the file or folder at `path`, one set a model, in the
    order the file first names them."""
    if path.is_dir():
        return _arena_folder(path, error_markers)
    check_file(path)
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return _inspect(path, error_markers)
    if suffix == ".json":
        data = load_json(read_text(path), path)
        if isinstance(data, dict) and "eval" in data:  # an Inspect log written as JSON
            return _inspect(path, error_markers)
        if not isinstance(data, list):
            raise InputError(
                f"a .json answer file is AlpacaEval's: a list of objects with instruction and "
                f"output; this holds {json_kind(data)}",
                path=path,
            )
        return _alpaca(path, [(None, i + 1, x) for i, x in enumerate(data)], error_markers)
    if suffix in (".jsonl", ".ndjson"):
        records = list(read_json_lines(path, needs=" (one answer a line)"))
        if not records:
            raise InputError("the answer file is empty", path=path)
        first = records[0][1]
        rows = [(n, None, r) for n, r in records]
        if "uid" in first and "messages" in first:
            return _arena_answers(path, rows, _arena_questions(path.parent.parent), error_markers)
        if "choices" in first and "question_id" in first:
            return _fastchat(path, rows, error_markers)
        if "instruction" in first and "output" in first:
            return _alpaca(path, rows, error_markers)
        return _table(path, rows, error_markers)
    if suffix == ".csv":
        needs = "an answer table needs columns question_id, model and answer"
        return _table(path, [(n, None, r) for n, r in read_csv(path, (), needs)], error_markers)
    if suffix == ".parquet":
        return _table(path, _parquet_rows(path), error_markers)
    raise InputError(
        f"unknown answer file type '{suffix or '(none)'}': give an Arena-Hard folder or "
        "answer .jsonl, an AlpacaEval .json, a FastChat .jsonl, an Inspect log (.eval), or "
        "a table (.csv, .jsonl, .parquet) of question_id, model, answer",
        path=path,
    )


Row = tuple[int | None, int | None, Any]  # (line, row, record)


def _parquet_rows(path: Path) -> list[Row]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"not readable as Parquet ({exc})", path=path) from None
    return [(None, i + 1, r) for i, r in enumerate(table.to_pylist())]


def _text(value: Any, where: _Where, name: str, *, numbers: bool = False) -> str:
    if isinstance(value, str):
        return value
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise where.error(f"expected text, got {json_kind(value)}", name)


def _question_id(value: Any, where: _Where, name: str) -> str:
    ident = _text(value, where, name, numbers=True).strip()
    if not ident:
        raise where.error("a question id is empty", name)
    problem = name_problem(ident)
    if problem is not None:
        raise where.error(problem, name)
    return ident


def _content(value: Any, where: _Where, name: str) -> str:
    """A message's content: text, an object holding `answer` (Arena-Hard 2's assistant
    turns) or `content` (Arena-Hard 0.1's turns), or a list of parts whose text is joined
    (the chat APIs' form)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "answer" in value:
        return _text(value["answer"], where, f"{name}.answer")
    if isinstance(value, dict) and "content" in value:  # Arena-Hard 0.1's turns
        return _text(value["content"], where, f"{name}.content")
    if isinstance(value, list):
        texts = []
        for i, part in enumerate(value):
            text = part.get("text") if isinstance(part, dict) else part
            texts.append(_text(text, where, f"{name}[{i}].text"))
        return "".join(texts)
    raise where.error(
        f"expected text, an object with 'answer', or a list of text parts; got {json_kind(value)}",
        name,
    )


def _turns(value: Any, where: _Where, name: str) -> list[tuple[str, str]]:
    """A conversation as (role, text) turns."""
    if not isinstance(value, list) or not value:
        raise where.error(f"expected a list of messages, got {json_kind(value)}", name)
    turns = []
    for i, message in enumerate(value):
        at = f"{name}[{i}]"
        if not isinstance(message, dict):
            raise where.error(
                f"a message is an object with role and content, got {json_kind(message)}", at
            )
        role = message.get("role")
        if role not in ROLES:
            raise where.error(
                f"unknown role {role!r}: a message's role is one of {', '.join(ROLES)}",
                f"{at}.role",
            )
        turns.append((role, _content(message.get("content"), where, f"{at}.content")))
    return turns


def _shown(turns: Sequence[tuple[str, str]]) -> str:
    """Turns as judges read them: one turn's text as it is, several under their speakers."""
    if len(turns) == 1:
        return turns[0][1]
    return "\n\n".join(f"{SPEAKERS[role]}:\n{text}" for role, text in turns)


def split_conversation(
    turns: Sequence[tuple[str, str]], where: _Where, name: str
) -> tuple[str, str]:
    """(question, reply) of a conversation: what came before the first assistant turn,
    and everything from it on."""
    first = next((i for i, (role, _) in enumerate(turns) if role == "assistant"), None)
    if first is None:
        raise where.error("the conversation has no assistant turn: there is no answer", name)
    if first == 0:
        raise where.error("the conversation starts with the assistant: there is no question", name)
    return _shown(turns[:first]), _shown(turns[first:])


def _kind(text: str, markers: Sequence[str]) -> Kind:
    stripped = text.strip()
    if not stripped:
        return "empty"
    return "error" if stripped in markers else "answer"


class _Sets:
    """Answer sets by model as rows arrive; one answer a (model, question)."""

    def __init__(self, path: Path, fmt: str, markers: Sequence[str]) -> None:
        self.path, self.format, self.markers = path, fmt, markers
        self.sets: dict[str, AnswerSet] = {}

    def add(
        self,
        model: str,
        ident: str,
        reply: str,
        where: _Where,
        question: str | None,
        kind: Kind | None = None,
    ) -> None:
        answers = self.sets.setdefault(model, AnswerSet(model, self.path, self.format))
        before = answers.answers.get(ident)
        if before is not None:
            at = f"line {before.line}" if where.line is not None else "an earlier row"
            raise where.error(
                f"model '{model}' answers question '{ident}' twice (first at {at}); keep one"
            )
        kind = kind or _kind(reply, self.markers)
        answers.answers[ident] = Answer(reply, where.line or where.row, kind)
        if question is not None:
            answers.questions.setdefault(ident, question)

    def result(self, ignored: Collection[str] = ()) -> list[AnswerSet]:
        if not self.sets:
            raise InputError("the answer file holds no answers", path=self.path)
        for answers in self.sets.values():
            answers.ignored = tuple(sorted(ignored))
        return list(self.sets.values())


def _model(value: Any, where: _Where, name: str) -> str:
    model = _text(value, where, name).strip()
    problem = "a model name is empty" if not model else name_problem(model)
    if problem is not None:
        raise where.error(problem, name)
    return model


def _records(path: Path, rows: Sequence[Row]) -> Iterator[tuple[_Where, dict[str, Any]]]:
    """Each row's place and record (an object, or an error at its place)."""
    for line, row, record in rows:
        where = _Where(path, line, row)
        if not isinstance(record, dict):
            raise where.error(f"each answer is an object, got {json_kind(record)}")
        yield where, record


def _alpaca(path: Path, rows: Sequence[Row], markers: Sequence[str]) -> list[AnswerSet]:
    sets = _Sets(path, "alpaca-eval", markers)
    ignored: set[str] = set()
    for where, record in _records(path, rows):
        for name in ("instruction", "output"):
            if name not in record:
                raise where.error(f"an AlpacaEval output needs {name}", name)
        instruction = _text(record["instruction"], where, "instruction")
        generator = record.get("generator")
        model = _model(generator, where, "generator") if generator is not None else path.stem
        output = _text(record["output"], where, "output")
        sets.add(model, question_id_of(instruction), output, where, instruction)
        ignored |= record.keys() - {"instruction", "output", "generator", "dataset"}
    return sets.result(ignored)


def _arena_questions(folder: Path) -> dict[str, str]:
    """Arena-Hard's `question.jsonl` in `folder` (uid -> prompt; FastChat's first turn);
    none where absent."""
    path = folder / "question.jsonl"
    if not path.is_file():
        return {}
    questions = {}
    for line, record in read_json_lines(path, needs=" (one question a line)"):
        where = _Where(path, line)
        ident = _question_id(record.get("uid", record.get("question_id")), where, "uid")
        if ident in questions:
            raise where.error(f"question '{ident}' appears twice", "uid")
        if "prompt" in record:
            questions[ident] = _text(record["prompt"], where, "prompt")
        elif "turns" in record:  # FastChat's question files
            turns = record["turns"]
            if not isinstance(turns, list) or not turns:
                raise where.error(f"expected a list of turns, got {json_kind(turns)}", "turns")
            questions[ident] = _content(turns[0], where, "turns[0]")
        else:
            raise where.error("a question needs a prompt (or turns)", "prompt")
    return questions


def _arena_folder(folder: Path, markers: Sequence[str]) -> list[AnswerSet]:
    answers = folder / "model_answer"
    if not (folder / "question.jsonl").is_file() or not answers.is_dir():
        raise InputError(
            "an answer folder is Arena-Hard's: question.jsonl and a model_answer folder of "
            "<model>.jsonl files; give an answer file instead",
            path=folder,
        )
    sets = []
    for path in sorted(answers.glob("*.jsonl")):  # Arena-Hard's or FastChat's, by the records
        sets += read_answers(path, error_markers=markers)
    if not sets:
        raise InputError("model_answer holds no <model>.jsonl answer files", path=answers)
    return sets


def _arena_answers(
    path: Path, rows: Sequence[Row], questions: dict[str, str], markers: Sequence[str]
) -> list[AnswerSet]:
    sets = _Sets(path, "arena-hard", markers)
    ignored: set[str] = set()
    for where, record in _records(path, rows):
        ident = _question_id(record.get("uid"), where, "uid")
        model = _model(record.get("model", path.stem), where, "model")
        turns = _turns(record.get("messages"), where, "messages")
        asked, reply = split_conversation(turns, where, "messages")
        if questions and ident not in questions:
            raise where.error(
                f"question '{ident}' is not in {path.parent.parent / 'question.jsonl'}", "uid"
            )
        sets.add(model, ident, reply, where, questions.get(ident, asked))
        ignored |= record.keys() - {"uid", "model", "messages", "ans_id", "tstamp", "metadata"}
    return sets.result(ignored)


def _fastchat(path: Path, rows: Sequence[Row], markers: Sequence[str]) -> list[AnswerSet]:
    """FastChat's answers: the assistant turns of `choices[0]`, between the user turns of
    the question file beside the answers (or one level up, as MT-Bench lays them)."""
    folder = next(
        (f for f in (path.parent, path.parent.parent) if (f / "question.jsonl").is_file()), None
    )
    if folder is None:
        raise InputError(
            "FastChat answers need their question.jsonl (question_id, turns) beside them or "
            "one folder up",
            path=path,
        )
    user_turns = _fastchat_turns(folder / "question.jsonl")
    sets = _Sets(path, "fastchat", markers)
    for where, record in _records(path, rows):
        ident = _question_id(record.get("question_id"), where, "question_id")
        model = _model(record.get("model_id", path.stem), where, "model_id")
        choices = record.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise where.error(f"expected a list of choices, got {json_kind(choices)}", "choices")
        replies = choices[0].get("turns")
        if not isinstance(replies, list) or not replies:
            raise where.error(
                f"expected a list of turns, got {json_kind(replies)}", "choices[0].turns"
            )
        asked = user_turns.get(ident)
        if asked is None:
            raise where.error(
                f"question '{ident}' is not in {folder / 'question.jsonl'}", "question_id"
            )
        if len(replies) > len(asked):
            raise where.error(
                f"{len(replies)} answer turns to a question of {len(asked)} turns",
                "choices[0].turns",
            )
        turns = []
        for i, text in enumerate(replies):
            if i:
                turns.append(("user", asked[i]))
            turns.append(("assistant", _content(text, where, f"choices[0].turns[{i}]")))
        sets.add(model, ident, _shown(turns), where, asked[0])
    return sets.result()


def _fastchat_turns(path: Path) -> dict[str, list[str]]:
    turns: dict[str, list[str]] = {}
    for line, record in read_json_lines(path, needs=" (one question a line)"):
        where = _Where(path, line)
        ident = _question_id(record.get("question_id"), where, "question_id")
        value = record.get("turns")
        if not isinstance(value, list) or not value:
            raise where.error(f"expected a list of turns, got {json_kind(value)}", "turns")
        turns[ident] = [_content(t, where, f"turns[{i}]") for i, t in enumerate(value)]
    return turns


def _inspect(path: Path, markers: Sequence[str]) -> list[AnswerSet]:
    """An Inspect AI eval log: its model's answer to each sample (the output's text; a
    sample that ended in an error is an error marker), the question what the model was
    given (a conversation in full), by sample id, and by epoch where there are several."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(
            "an Inspect eval log is read with Inspect's own reader: pip install "
            "'eigenjury[inspect]'",
            path=path,
        ) from None
    try:
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # Inspect's reader raises its own kinds for a damaged log
        raise InputError(f"not readable as an Inspect eval log ({exc})", path=path) from None
    where = _Where(path)
    model = _model(log.eval.model, where, "eval.model")
    epochs = max((sample.epoch for sample in log.samples or ()), default=1)
    sets = _Sets(path, "inspect", markers)
    for row, sample in enumerate(log.samples or (), start=1):
        at = _Where(path, row=row)
        ident = _question_id(sample.id, at, "id")
        if epochs > 1:
            ident = f"{ident}/{sample.epoch}"
        given = sample.input
        turns = [("user", given)] if isinstance(given, str) else [(m.role, m.text) for m in given]
        failed = sample.error is not None  # the harness failed, not the model
        reply = "" if failed else sample.output.completion
        sets.add(model, ident, reply, at, _shown(turns), kind="error" if failed else None)
    return sets.result()


def _table(path: Path, rows: Sequence[Row], markers: Sequence[str]) -> list[AnswerSet]:
    sets = _Sets(path, "table", markers)
    ignored: set[str] = set()
    for where, record in _records(path, rows):
        missing = [c for c in ("question_id", "model") if c not in record]
        if missing or not ("answer" in record or "messages" in record):
            lacking = [
                *missing,
                *([] if "answer" in record or "messages" in record else ["answer"]),
            ]
            raise where.error(
                f"missing {', '.join(lacking)}: an answer table has columns question_id, model "
                "and answer (or messages), and may have question; found "
                f"{', '.join(record) or 'none'}"
            )
        ident = _question_id(record["question_id"], where, "question_id")
        model = _model(record["model"], where, "model")
        question = record.get("question")
        asked = None if question in (None, "") else _text(question, where, "question")
        messages = record.get("messages")
        if messages not in (None, ""):
            if isinstance(messages, str):  # a CSV cell holds JSON
                messages = load_json(messages, path, where.line)
            spoken, reply = split_conversation(
                _turns(messages, where, "messages"), where, "messages"
            )
            asked = asked or spoken
        else:
            reply = (
                _text(record["answer"], where, "answer", numbers=True)
                if record["answer"] is not None
                else ""
            )
        sets.add(model, ident, reply, where, asked)
        ignored |= record.keys() - set(TABLE_COLUMNS)
    return sets.result(ignored)


def member_set(sets: Sequence[AnswerSet], member: str, model: str | None, path: Path) -> AnswerSet:
    """The answers of `member` among a file's sets: the model named (default: the
    member's name, or the file's one model)."""
    by_model = {s.model: s for s in sets}
    if model is not None or len(sets) > 1:
        wanted = model or member
        if wanted in by_model:
            return by_model[wanted]
        held = ", ".join(sorted(by_model))
        raise InputError(
            f"member '{member}': the file holds no answers of model '{wanted}' (it holds "
            f"{held}); name one (answers: {{path: ..., model: NAME}})",
            path=path,
        )
    return sets[0]


@dataclass(frozen=True)
class Given:
    """A run's given answers: each answering member's set, and what empty and failed
    answers count as (peer.config.AnswerRules' `empty` and `errors`)."""

    sets: dict[str, AnswerSet]  # member -> its answers
    empty: str = "loss"
    errors: str = "exclude"

    def _rule(self, answer: Answer) -> str:
        return {"answer": "judge", "empty": self.empty, "error": self.errors}[answer.kind]

    def answered(self, member: str, scenario: str) -> bool:
        """Whether `member` takes part in comparisons on `scenario`: it replies through
        its model, or has an answer there that its rule does not exclude."""
        answers = self.sets.get(member)
        if answers is None:
            return True
        answer = answers.answers.get(scenario)
        return answer is not None and self._rule(answer) != "exclude"

    def replies(self, scenarios: Sequence[str]) -> dict[tuple[str, str], str]:
        """(member, scenario) -> the reply judges read, for every answer taking part."""
        return {
            (member, s): answers.answers[s].text
            for member, answers in self.sets.items()
            for s in scenarios
            if self.answered(member, s)
        }

    def forfeits(self, scenarios: Sequence[str]) -> dict[tuple[str, str], str]:
        """(member, scenario) -> what the answer is, for answers that lose by rule."""
        words = {"empty": "empty", "error": "an error marker"}
        return {
            (member, s): words[answer.kind]
            for member, answers in self.sets.items()
            for s in scenarios
            if (answer := answers.answers.get(s)) is not None and self._rule(answer) == "loss"
        }

    def questions(self) -> dict[str, str]:
        """Question id -> text, from the first file that carries it."""
        out: dict[str, str] = {}
        for answers in self.sets.values():
            for ident in answers.answers:
                text = answers.questions.get(ident)
                if text is not None:
                    out.setdefault(ident, text)
        return out

    def summary(self, scenarios: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per answering member, where its answers came from and what became of them on
        the run's scenarios: answered, missing, empty and failed (with the rule each
        followed), and answers to questions the run does not use."""
        asked = set(scenarios)
        out = {}
        for member, answers in self.sets.items():
            held = answers.answers
            out[member] = {
                "file": str(answers.path),
                "format": answers.format,
                "model": answers.model,
                "answered": sum(s in held and held[s].kind == "answer" for s in scenarios),
                "missing": sum(s not in held for s in scenarios),
                "empty": sum(s in held and held[s].kind == "empty" for s in scenarios),
                "errors": sum(s in held and held[s].kind == "error" for s in scenarios),
                "empty_rule": self.empty,
                "errors_rule": self.errors,
                "unused": sum(ident not in asked for ident in held),
                "ignored_fields": list(answers.ignored),
            }
        return out
