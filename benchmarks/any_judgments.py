"""Reading judgments at any size: `eigenjury fit` end to end against the bare minimum.

Three cases, each timed as whole processes (imports included on both sides), side by
side and interleaved, on files written here:

- csv: 1,008,000 peer verdicts (8 models, 21,000 scenarios, 4 judges per scenario) as
  CSV. `eigenjury fit FILE --bootstrap 0` against a bare script that reads the file
  with `pyarrow.csv.read_csv`, dictionary-encodes the names and runs the same fit
  (PeerRanking, no validation, no report). Target: within 1.5x.
- parquet: 1e8 peer verdicts (20 models, 1e6 scenarios) as a Parquet dataset (one
  folder, 100 files). `eigenjury fit DIR --bootstrap 0`: wall time and the peak
  resident memory of the process. Target: under 4 GB.
- styled-parquet: peer verdicts as above with two reply features (first_length and
  second_length, log-normal token counts; first_headers and second_headers, Poisson),
  1e6, 4e6, 8e6 and 1e8 of them (files of 1e6): `eigenjury fit DIR --bootstrap 0`
  with style control (on by default), wall time and peak resident memory. Target
  (issue 33): 1e8 under 4 GB.
- arena-csv: the same battles as CSV with a question id per battle (1.67 M distinct
  ids, 94 MB as LMArena's exports are). `eigenjury fit battles.csv --bootstrap 0`
  against a bare script that reads the file with `pyarrow.csv.read_csv`, encodes the
  names and the outcomes and runs the same fit. Target: within 1.5x.
- start: the command's start, `eigenjury --version` and `eigenjury fit --help` (every
  subcommand's options built), against a bare `python -c pass`. Target: under 0.5 s.
- arena: 1.67 M battles over 129 models in the Chatbot Arena convention (model_a,
  model_b, winner with both tie kinds, question_id, and columns to ignore), simulated
  from Davidson's model with a popularity skew like the arena's. `eigenjury fit
  battles.parquet --bootstrap 0` (one crowd judge: an external judge) against
  evalica's Bradley-Terry as an arena user calls it (pandas columns, ties as half
  wins), with the time and the rank agreement of the two and of each with the truth.
  The JSON array form (as the arena publishes it) is timed too.

    python benchmarks/any_judgments.py [csv] [parquet] [styled-parquet] [arena-csv] \
        [start] [arena] \
        [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import environment, table

BARE_FIT = """
import sys
import numpy as np
import pyarrow as pa
import pyarrow.csv
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.verdicts import VerdictTable

data = pyarrow.csv.read_csv(sys.argv[1])
n = data.num_rows
names = pa.concat_arrays([data[c].combine_chunks() for c in ("judge", "first", "second")])
names = names.dictionary_encode()
codes = names.indices.to_numpy().astype(np.int64)
scenario = data["scenario"].combine_chunks().dictionary_encode()
table = VerdictTable(
    scenario.indices.to_numpy().astype(np.int64), codes[:n], codes[n : 2 * n], codes[2 * n :],
    data["verdict"].to_numpy().astype(np.int64), tuple(names.dictionary.to_pylist()),
    tuple(scenario.dictionary.to_pylist()), np.ones(n),
)
ranking = PeerRanking(2, bootstrap=0).fit(table)
print(len(ranking.elo_))
"""

BARE_ARENA_FIT = """
import sys
import numpy as np
import pyarrow as pa
import pyarrow.csv
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.verdicts import VerdictTable

data = pyarrow.csv.read_csv(sys.argv[1])
n = data.num_rows
names = pa.concat_arrays([data[c].combine_chunks() for c in ("model_a", "model_b")])
names = names.dictionary_encode()
codes = names.indices.to_numpy().astype(np.int64)
winner = data["winner"].to_numpy(zero_copy_only=False)
verdict = np.where(winner == "model_a", 1, np.where(winner == "model_b", 2, 0))
question = data["question_id"].combine_chunks().dictionary_encode()
models = tuple(names.dictionary.to_pylist())
table = VerdictTable(
    question.indices.to_numpy().astype(np.int64), np.full(n, len(models)), codes[:n],
    codes[n:], verdict, (*models, "crowd"), tuple(question.dictionary.to_pylist()), np.ones(n),
)
ranking = PeerRanking(2, bootstrap=0).fit(table)
print(len(ranking.elo_))
"""

BARE_EVALICA = """
import sys
import evalica
import numpy as np
import pyarrow.parquet as pq

frame = pq.read_table(sys.argv[1], columns=["model_a", "model_b", "winner"]).to_pandas()
outcome = {"model_a": evalica.Winner.X, "model_b": evalica.Winner.Y,
           "tie": evalica.Winner.Draw, "tie (bothbad)": evalica.Winner.Draw}
result = evalica.bradley_terry(frame["model_a"], frame["model_b"], frame["winner"].map(outcome))
np.save(sys.argv[2], np.log(result.scores.reindex(sorted(result.scores.index)).to_numpy()))
"""


def measured(command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak resident memory (GB) and stdout of one child process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # reaped here, so its rusage is its own
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(
                f"{' '.join(command)} failed ({child.returncode}):\n{err.read()[-2000:]}"
            )
        return wall, usage.ru_maxrss / 1e6, out.read()


def eigenjury(*args: str) -> list[str]:
    return [sys.executable, "-m", "eigenjury", *args]


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def side_by_side(commands: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Interleaved repeats of each command; wall seconds per command."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            times[name].append(measured(command)[0])
    return times


def csv_case(folder: Path, repeat: int, quick: bool) -> str:
    scenarios = 2100 if quick else 21000
    subprocess.run(
        eigenjury(
            "simulate",
            "--out",
            str(folder / "sim"),
            "--models",
            "8",
            "--scenarios",
            str(scenarios),
            "--judges-per-scenario",
            "4",
        ),
        check=True,
        capture_output=True,
    )
    path = str(folder / "sim" / "verdicts.csv")
    times = side_by_side(
        {
            "bare: pyarrow read_csv + encode + fit": python(BARE_FIT, path),
            "eigenjury fit --bootstrap 0": eigenjury("fit", path, "--bootstrap", "0"),
        },
        repeat,
    )
    bare, tool = (statistics.median(t) for t in times.values())
    rows = [[name, min(t), statistics.median(t)] for name, t in times.items()]
    return (
        f"{scenarios * 48:,} verdicts, CSV ({os.path.getsize(path) / 1e6:.0f} MB)\n\n"
        + table(["process", "best s", "median s"], rows)
        + f"\n\nratio of medians (eigenjury / bare): {tool / bare:.2f}"
    )


def write_peer_dataset(
    folder: Path, files: int, rows_per_file: int, seed: int, *, features: bool = False
) -> None:
    """A Parquet dataset of peer verdicts from a random low-rank BTD population; with
    `features`, each reply's length and headers beside them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    m, dim = 20, 2
    rng = np.random.default_rng(seed)
    lens = rng.normal(1.0, 0.3, (m, dim))
    disposition = rng.normal(0.0, 0.7, (m, dim))
    score = lens @ disposition.T  # judge x evaluee
    tie = 0.6
    s1, s2 = np.broadcast_arrays(score[:, :, None], score[:, None, :])
    logits = np.stack([np.log(tie) + (s1 + s2) / 2, s1, s2], axis=-1)  # judge, first, second
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    names = pa.array([f"model-{i:02d}" for i in range(m)])
    per_scenario = 100
    folder.mkdir(parents=True)
    for f in range(files):
        judge = rng.integers(m, size=rows_per_file)
        first = rng.integers(m, size=rows_per_file)
        second = (first + 1 + rng.integers(m - 1, size=rows_per_file)) % m
        u = rng.random(rows_per_file)
        verdict = (u[:, None] > cdf[judge, first, second]).sum(axis=1)
        scenario = f * rows_per_file // per_scenario + np.arange(rows_per_file) // per_scenario
        columns = {
            "scenario": pa.array(scenario).cast(pa.string()),
            "judge": names.take(pa.array(judge)),
            "first": names.take(pa.array(first)),
            "second": names.take(pa.array(second)),
            "verdict": pa.array(verdict.astype(np.int8)),
        }
        if features:
            for side in ("first", "second"):
                length = np.exp(rng.normal(6.0, 0.5, rows_per_file))
                columns[f"{side}_length"] = pa.array(np.rint(length).astype(np.int64))
                columns[f"{side}_headers"] = pa.array(rng.poisson(2.0, rows_per_file))
        pq.write_table(pa.table(columns), folder / f"part-{f:03d}.parquet")


def parquet_case(folder: Path, quick: bool) -> str:
    files, rows = (10, 100_000) if quick else (100, 1_000_000)
    dataset = folder / "verdicts.parquet"
    start = time.perf_counter()
    write_peer_dataset(dataset, files, rows, seed=1)
    written = time.perf_counter() - start
    size = sum(p.stat().st_size for p in dataset.iterdir()) / 1e9
    wall, peak, out = measured(eigenjury("fit", str(dataset), "--bootstrap", "0"))
    fit_line = next((line for line in out.splitlines() if line.startswith("fit:")), "")
    return (
        f"{files * rows:,} verdicts in {files} Parquet files ({size:.2f} GB on disk, "
        f"written in {written:.0f} s)\n\n"
        + table(
            ["process", "wall s", "peak RSS GB"],
            [["eigenjury fit DIR --bootstrap 0", wall, peak]],
        )
        + f"\n\n{fit_line}"
    )


def write_battles(
    folder: Path, battles: int, models: int, seed: int, *, csv_per_battle: bool = False
) -> np.ndarray:
    """Arena-style battles from Davidson's model, as battles.parquet and battles.json,
    or (`csv_per_battle`) as battles.csv with a question id of its own per battle;
    returns the true strengths (sorted by model name)."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 0.6, models)
    popularity = rng.dirichlet(np.full(models, 0.7))  # a few models get most battles
    a = rng.choice(models, size=battles, p=popularity)
    b = rng.choice(models, size=battles, p=popularity)
    while (same := a == b).any():  # a different model, drawn by the same popularity
        b[same] = rng.choice(models, size=int(same.sum()), p=popularity)
    nu = 0.55  # Davidson tie parameter: about 30% ties, as on the arena
    pa_, pb = np.exp(strength[a]), np.exp(strength[b])
    pt = nu * np.sqrt(pa_ * pb)
    u = rng.random(battles) * (pa_ + pb + pt)
    outcome = np.where(u < pa_, 0, np.where(u < pa_ + pb, 1, 2))
    bothbad = rng.random(battles) < 0.6
    winner = np.where(outcome == 0, "model_a", np.where(outcome == 1, "model_b", "tie"))
    winner = np.where((outcome == 2) & bothbad, "tie (bothbad)", winner)
    names = np.array([f"model-{i:03d}-v{i % 7}.{i % 3}" for i in range(models)])
    question = (
        rng.permutation(battles)  # LMArena's exports: an id per battle
        if csv_per_battle
        else rng.integers(0, battles // 4 * 3, size=battles)  # some questions repeat
    )
    data = pa.table(
        {
            "model_a": names[a],
            "model_b": names[b],
            "winner": winner,
            "judge_hash": pa.array(rng.integers(0, 2**62, size=battles)).cast(pa.string()),
            "turn": rng.integers(1, 4, size=battles),
            "anony": rng.random(battles) < 0.9,
            "language": np.where(rng.random(battles) < 0.7, "English", "Chinese"),
            "tstamp": 1.7e9 + np.sort(rng.random(battles)) * 3e7,
            "question_id": pa.array(question).cast(pa.string()),
        }
    )
    if csv_per_battle:
        ids = pa.array(np.char.add("q", question.astype(str)).astype(object))
        data = data.set_column(data.num_columns - 1, "question_id", ids)
        pyarrow.csv.write_csv(data, folder / "battles.csv")
    else:
        pq.write_table(data, folder / "battles.parquet")
        records = data.to_pylist()
        (folder / "battles.json").write_text(json.dumps(records), encoding="utf-8")
    order = np.argsort(names)
    return np.asarray(strength[order])


def styled_parquet_case(folder: Path, quick: bool) -> str:
    rows, sizes = (100_000, (1, 4)) if quick else (1_000_000, (1, 4, 8, 100))
    lines = []
    for files in sizes:
        dataset = folder / f"styled-{files}"
        write_peer_dataset(dataset, files, rows, seed=2, features=True)
        wall, peak, _ = measured(eigenjury("fit", str(dataset), "--bootstrap", "0"))
        lines.append([f"{files * rows:,}", wall, peak])
        shutil.rmtree(dataset)
    return table(["verdicts", "wall s", "peak RSS GB"], lines)


def arena_csv_case(folder: Path, repeat: int, quick: bool) -> str:
    battles, models = (100_000, 60) if quick else (1_670_000, 129)
    write_battles(folder, battles, models, seed=3, csv_per_battle=True)
    path = folder / "battles.csv"
    times = side_by_side(
        {
            "bare: pyarrow read_csv + encode + fit": python(BARE_ARENA_FIT, str(path)),
            "eigenjury fit battles.csv --bootstrap 0": eigenjury(
                "fit", str(path), "--bootstrap", "0"
            ),
        },
        repeat,
    )
    bare, tool = (statistics.median(t) for t in times.values())
    rows = [[name, min(t), statistics.median(t)] for name, t in times.items()]
    return (
        f"{battles:,} battles over {models} models, a question id per battle, CSV "
        f"({path.stat().st_size / 1e6:.0f} MB)\n\n"
        + table(["process", "best s", "median s"], rows)
        + f"\n\nratio of medians (eigenjury / bare): {tool / bare:.2f}"
    )


def start_case(repeat: int) -> str:
    """The command's start: its imports and every subcommand's options, interleaved with
    a bare interpreter. The console script as installed (its bytecode compiled)."""
    script = str(Path(sys.executable).with_name("eigenjury"))
    times = side_by_side(
        {
            "python -c pass": python("pass"),
            "eigenjury --version": [script, "--version"],
            "eigenjury fit --help": [script, "fit", "--help"],
        },
        repeat * 4,
    )
    rows = [[name, min(t), statistics.median(t)] for name, t in times.items()]
    return table(["process", "best s", "median s"], rows)


def arena_case(folder: Path, repeat: int, quick: bool) -> str:
    from scipy.stats import kendalltau, spearmanr

    battles, models = (100_000, 60) if quick else (1_670_000, 129)
    truth = write_battles(folder, battles, models, seed=3)
    parquet, array = folder / "battles.parquet", folder / "battles.json"
    out = folder / "arena-fit.json"
    evalica_scores = folder / "evalica.npy"
    commands = {
        "evalica.bradley_terry (pandas in, Rust fit)": python(
            BARE_EVALICA, str(parquet), str(evalica_scores)
        ),
        "eigenjury fit battles.parquet --bootstrap 0": eigenjury(
            "fit", str(parquet), "--bootstrap", "0", "--out", str(out)
        ),
    }
    times = side_by_side(commands, repeat)
    json_wall = measured(eigenjury("fit", str(array), "--bootstrap", "0"))[0]
    record = json.loads(out.read_text(encoding="utf-8"))
    elo = {row["name"]: row["elo"] for row in record["models"]}
    ours = np.array([elo[name] for name in sorted(elo)])
    theirs = np.load(evalica_scores)
    rows = [[name, min(t), statistics.median(t)] for name, t in times.items()]
    rows.append(["eigenjury fit battles.json --bootstrap 0 (JSON array)", json_wall, json_wall])
    agreement = [
        ["eigenjury Elo vs evalica BT", spearmanr(ours, theirs)[0], kendalltau(ours, theirs)[0]],
        ["eigenjury Elo vs truth", spearmanr(ours, truth)[0], kendalltau(ours, truth)[0]],
        ["evalica BT vs truth", spearmanr(theirs, truth)[0], kendalltau(theirs, truth)[0]],
    ]
    evalica_median, ours_median = (statistics.median(t) for t in times.values())
    ratio = ours_median / evalica_median
    return (
        f"{battles:,} battles over {models} models (Parquet {parquet.stat().st_size / 1e6:.0f} "
        f"MB, JSON array {array.stat().st_size / 1e6:.0f} MB)\n\n"
        + table(["process", "best s", "median s"], rows)
        + f"\n\nratio of medians (eigenjury / evalica): {ratio:.2f}\n\n"
        + table(["rankings", "Spearman", "Kendall tau"], agreement)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cases = ["csv", "parquet", "styled-parquet", "arena-csv", "start", "arena"]
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(cases)} (default: all)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    if unknown := set(args.cases) - set(cases):
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}")
    repeat = 1 if args.quick else args.repeat
    print(environment("pyarrow", "evalica"))
    folder = Path(tempfile.mkdtemp(prefix="eigenjury-any-"))
    try:
        for case in args.cases or cases:
            work = folder / case
            work.mkdir()
            print(f"\n## {case}\n")
            if case == "csv":
                print(csv_case(work, repeat, args.quick))
            elif case == "parquet":
                print(parquet_case(work, args.quick))
            elif case == "styled-parquet":
                print(styled_parquet_case(work, args.quick))
            elif case == "arena-csv":
                print(arena_csv_case(work, repeat, args.quick))
            elif case == "start":
                print(start_case(repeat))
            else:
                print(arena_case(work, repeat, args.quick))
            shutil.rmtree(work)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
