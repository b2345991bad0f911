"""Given answers at Arena-Hard's size (issue 29): 750 questions, a baseline and two answer
sets in Arena-Hard-Auto's layout, answers of realistic length (300-3,000 characters,
markdown, some as Arena-Hard 2's content objects, some multi-turn). Each case runs in a
fresh process and reports wall seconds and peak resident memory:

- read: `peer.answers.read_answers` of the folder (every model's file);
- plan: `peer.run.prepare` of the config `eigenjury judge` writes (config, answers,
  questions, constitution, output check) and the baseline design;
- run: the whole `eigenjury judge ... --baseline` with a scripted judge (every call
  through the engine and its store), then the same command again, every call from the
  store.

    python benchmarks/given_answers.py [--questions 750] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import environment, spread, table

CASE = """
import resource, sys, time
from pathlib import Path
start = time.perf_counter()
case, folder = sys.argv[1], Path(sys.argv[2])
if case == "read":
    from eigenjury.peer.answers import read_answers
    sets = read_answers(folder / "data")
    size = sum(len(s.answers) for s in sets)
elif case == "plan":
    from eigenjury.peer.run import prepare, static_design
    inputs = prepare(folder / "judged" / "config.yaml", folder / "plan-out")
    size = len(static_design(inputs.config, list(inputs.scenarios), inputs.given))
else:
    from eigenjury.cli import main
    from eigenjury.models.providers.scripted import register_script
    def judge(request):  # a judge that prefers the longer answer, decided at once
        replies = request.messages[-1].content.split("<reply>")
        longer = "A" if len(replies[1]) >= len(replies[2]) else "B"
        return f"<verdict>{longer}</verdict>"
    register_script("longer", judge)
    args = ["judge", str(folder / "data"), "--judge", "scripted:longer", "--baseline", "base",
            "--out", str(folder / "judged"), "--bootstrap", "100", "--no-progress"]
    code = main(args)
    assert code == 0, code
    size = 0
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{seconds} {peak} {size}")
"""

WORDS = ("the", "a", "model", "answer", "code", "data", "value", "result", "function", "list",
         "table", "user", "step")  # fmt: skip


def answer(rng: random.Random) -> str:
    """An answer as chat models write them: paragraphs, a list, sometimes a header."""
    parts = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) + "."
        for _ in range(rng.randint(1, 6))
    ]
    if rng.random() < 0.5:
        parts.append("\n".join(f"- {rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(4)))
    if rng.random() < 0.3:
        parts.insert(0, "## Answer")
    return "\n\n".join(parts)


def write_folder(folder: Path, questions: int, seed: int = 0) -> None:
    """Arena-Hard-Auto's layout: question.jsonl and model_answer/<model>.jsonl."""
    rng = random.Random(seed)
    uids = [f"{rng.getrandbits(64):016x}" for _ in range(questions)]
    (folder / "model_answer").mkdir(parents=True)
    prompts = {
        u: " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 200))) + "?" for u in uids
    }
    with (folder / "question.jsonl").open("w") as f:
        for u in uids:
            f.write(json.dumps({"uid": u, "category": "hard_prompt", "prompt": prompts[u]}) + "\n")
    for model in ("base", "model-a", "model-b"):
        with (folder / "model_answer" / f"{model}.jsonl").open("w") as f:
            for i, u in enumerate(uids):
                messages = [{"role": "user", "content": prompts[u]}]
                if i % 10 == 0:  # a conversation
                    messages += [{"role": "assistant", "content": answer(rng)},
                                 {"role": "user", "content": "Shorter, please."}]  # fmt: skip
                content = answer(rng)
                messages.append(
                    {"role": "assistant", "content": {"answer": content} if i % 2 else content}
                )
                record = {"uid": u, "ans_id": str(i), "model": model, "messages": messages}
                f.write(json.dumps(record) + "\n")


def measure(case: str, folder: Path, store: Path) -> tuple[float, float, int]:
    env = {"EIGENJURY_DATA_DIR": str(store), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", CASE, case, str(folder)],
        capture_output=True, text=True, check=True, env=env,
        cwd=Path(__file__).parent,
    )  # fmt: skip
    seconds, peak, size = done.stdout.split()[-3:]
    return float(seconds), float(peak), int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=750)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(environment())
    with tempfile.TemporaryDirectory(prefix="eigenjury-given-") as tmp:
        folder, store = Path(tmp), Path(tmp) / "store"
        write_folder(folder / "data", args.questions)
        megabytes = sum(p.stat().st_size for p in (folder / "data").rglob("*.jsonl")) / 1e6
        print(f"\n{args.questions} questions x 3 answer sets, {megabytes:.1f} MB of JSONL\n")
        rows = []
        first, first_peak, _ = measure("run", folder, store)  # every call made, then stored
        for case in ("read", "plan", "run"):
            results = [measure(case, folder, store) for _ in range(args.repeat)]
            label = "run (every call from the store)" if case == "run" else case
            size = results[0][2]
            rows.append([label, spread([r[0] for r in results]),
                         f"{max(r[1] for r in results) / 2**20:.0f}", size or "-"])  # fmt: skip
        rows.insert(2, ["run (every call made)", f"{first:.3g}", f"{first_peak / 2**20:.0f}", "-"])
        print(
            table(
                ["case", "seconds (best / median)", "peak RSS MiB", "answers or comparisons"], rows
            )
        )


if __name__ == "__main__":
    main()
