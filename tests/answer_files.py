"""Answer files as the tools people use write them, made here from plain data: each
writer takes {model: {question id: answer}} (an answer is text, or a list of (role,
text) turns after the first question for a conversation) and the questions' texts."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eigenjury.peer.answers import question_id_of

Answers = dict[str, dict[str, Any]]  # model -> question id -> answer


def _lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def arena_hard(folder: Path, answers: Answers, questions: dict[str, str]) -> Path:
    """Arena-Hard-Auto's layout: question.jsonl and model_answer/<model>.jsonl; the
    assistant's content an object holding `answer` (as Arena-Hard 2 writes it) for odd
    questions and a string for even ones; a conversation's later turns follow."""
    _lines(
        folder / "question.jsonl",
        [{"uid": u, "category": "hard_prompt", "prompt": p} for u, p in questions.items()],
    )
    for model, given in answers.items():
        records = []
        for i, (uid, answer) in enumerate(given.items()):
            turns = answer if isinstance(answer, list) else [("assistant", answer)]
            messages: list[dict[str, Any]] = [{"role": "user", "content": questions[uid]}]
            for role, text in turns:
                content: Any = {"answer": text} if role == "assistant" and i % 2 else text
                messages.append({"role": role, "content": content})
            records.append({"uid": uid, "ans_id": f"a{i}", "model": model, "messages": messages,
                            "tstamp": 1.7e9, "metadata": {"token_len": 3}})  # fmt: skip
        _lines(folder / "model_answer" / f"{model}.jsonl", records)
    return folder


def alpaca_eval(path: Path, model: str, answers: dict[str, str]) -> Path:
    """AlpacaEval's outputs: a JSON array keyed by instruction (its text is the question)."""
    records = [
        {"dataset": "helpful_base", "instruction": q, "output": a, "generator": model}
        for q, a in answers.items()
    ]
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False))
    return path


def alpaca_ids(instructions: list[str]) -> list[str]:
    return [question_id_of(q) for q in instructions]


def table(path: Path, answers: Answers, questions: dict[str, str], **extra: Any) -> Path:
    """A plain table of question_id, model, answer, question (and any `extra` column),
    as CSV, JSONL or Parquet by the suffix."""
    rows = [
        {"question_id": q, "model": m, "answer": a, "question": questions[q], **extra}
        for m, given in answers.items()
        for q, a in given.items()
    ]
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        _lines(path, rows)
    return path


def fastchat(folder: Path, answers: Answers, turns: dict[str, list[str]]) -> Path:
    """FastChat's layout (MT-Bench): question.jsonl of user turns, and
    model_answer/<model>.jsonl of assistant turns (a list of texts per answer)."""
    questions = [
        {"question_id": int(q), "category": "writing", "turns": t} for q, t in turns.items()
    ]
    _lines(folder / "question.jsonl", questions)
    for model, given in answers.items():
        records = [
            {"question_id": int(q), "answer_id": "x", "model_id": model, "tstamp": 1.0,
             "choices": [{"index": 0, "turns": a}]}
            for q, a in given.items()
        ]  # fmt: skip
        _lines(folder / "model_answer" / f"{model}.jsonl", records)
    return folder
