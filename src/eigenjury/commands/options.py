"""Option types and option groups shared by the commands.

Every range an option accepts is named when a value falls outside it; the engine's
options take their defaults from `EngineSettings`, so a config and a command line mean
the same thing by the same setting.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from eigenjury.engine.backends import backend_names
from eigenjury.engine.settings import DEFAULT_STORE_SAID, EngineSettings, default_store
from eigenjury.errors import InputError, located
from eigenjury.files import blocking_file, output_target

if TYPE_CHECKING:
    from eigenjury.engine.engine import Engine
    from eigenjury.models.spec import ModelSpec
    from eigenjury.records import PlanRecord
    from eigenjury.stats.verdicts import VerdictTable
    from eigenjury.verdict_files import Collapse, Features


# Bootstrap rounds beyond this move a percentile interval by less than its own noise;
# every round's estimates are held at once.
MAX_ROUNDS = 100_000
PLAN_FILE = "plan.json"  # where --plan writes the plan unless given a file


def bounded(
    kind: Callable[[str], Any],
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> Callable[[str], Any]:
    """An argparse type that names the accepted range when a value falls outside it.

    NaN and infinities are refused whatever the range: no setting means them, and they
    would reach the results as NaN (and invalid JSON).
    """

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if value != value:  # NaN: every comparison below would be false
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        too_low = low is not None and (value <= low if open_low else value < low)
        too_high = high is not None and (value >= high if open_high else value > high)
        if too_low or too_high:
            lo = "(" if open_low else "["
            hi = ")" if open_high else "]"
            raise argparse.ArgumentTypeError(
                f"{text} is outside {lo}{'-inf' if low is None else low}, "
                f"{'inf' if high is None else high}{hi}"
            )
        return value

    return parse


def seed(text: str) -> int:
    """A random seed: a whole number from 0 up (numpy's generators refuse negative ones)."""
    try:
        value: int = bounded(int, 0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a seed; seeds are whole numbers from 0 up"
        ) from None
    return value


def add_verdict_format_option(parser: argparse.ArgumentParser) -> None:
    """How served judges (HTTP) are asked for a verdict (models.verdict_format)."""
    parser.add_argument(
        "--verdict-format",
        choices=("auto", "structured", "logprobs", "text"),
        default="auto",
        help="how served judges give a verdict: auto (a JSON-schema verdict where the endpoint "
        "enforces one, else text), or forced structured, logprobs (text with label scores) or "
        "text (default auto)",
    )


def folds(text: str) -> int:
    """Cross-validation folds: 0 (none) or at least 2 (one fold leaves nothing to hold out)."""
    value: int = bounded(int, 0)(text)
    if value == 1:
        raise argparse.ArgumentTypeError(
            "1 fold leaves no scenarios to hold out; use 0 (none) or at least 2"
        )
    return value


def style_features(text: str) -> Literal["default", "none"] | list[str]:
    """Reply features for style control, comma-separated, or "none" (no control) or
    "default", as FitSettings.style takes them."""
    word = text.strip().lower()
    if word in ("none", "default"):
        return "none" if word == "none" else "default"
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"{text!r} names an empty feature; give FEATURE[,FEATURE...] or none"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} named more than once")
    return names


def prior_scales(text: str) -> tuple[float, float, float] | Literal["none"]:
    """`fit --prior`: three positive standard deviations in logits (consensus, judge,
    self-preference), comma-separated, or "none" (no prior), as FitSettings.prior takes
    them."""
    if text.strip().lower() == "none":
        return "none"
    parts = text.split(",")
    value = bounded(float, 0.0, open_low=True)
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not CONSENSUS,JUDGE,SELF (three standard deviations in logits, "
            "e.g. 4,2,20) or none"
        )
    consensus, judge, own = (value(part.strip()) for part in parts)
    return consensus, judge, own


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The engine's knobs, shared by every command that calls models."""
    default = EngineSettings()
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--store",
        type=Path,
        help="SQLite store of call results, shared by every command "
        f"(default: {DEFAULT_STORE_SAID})",
    )
    group.add_argument(
        "--concurrency",
        type=bounded(int, 1),
        default=default.concurrency,
        help=f"calls in flight per endpoint (default {default.concurrency}; lower on 429)",
    )
    group.add_argument(
        "--rpm", type=bounded(float, 0.0, open_low=True), help="requests per minute per endpoint"
    )
    group.add_argument(
        "--tpm", type=bounded(float, 0.0, open_low=True), help="tokens per minute per endpoint"
    )
    group.add_argument(
        "--timeout",
        dest="timeout_s",
        type=bounded(float, 0.0, open_low=True),
        default=default.timeout_s,
        help=f"seconds per attempt (default {default.timeout_s:g})",
    )
    group.add_argument("--max-attempts", type=bounded(int, 1), default=default.max_attempts)
    group.add_argument(
        "--budget-usd",
        type=bounded(float, 0.0),
        help="stop sending calls before spending more than this",
    )
    group.add_argument(
        "--budget-tokens",
        type=bounded(int, 1),
        help="stop sending calls before using more tokens than this",
    )
    group.add_argument(
        "--budget-model",
        dest="budget_usd_by_model",
        type=model_budget,
        action="append",
        metavar="SPEC=USD",
        help="stop sending a model's calls before it costs more than this (repeatable)",
    )
    group.add_argument(
        "--prices", type=Path, help="price table (TOML or JSON) extending the built-in one"
    )
    group.add_argument(
        "--no-retry-errors",
        dest="retry_errors",
        action="store_false",
        help="reuse stored errors instead of trying those calls again",
    )
    group.add_argument("--no-progress", dest="progress", action="store_false")
    add_backend_options(group)
    add_plan_options(parser)


def add_plan_options(parser: argparse.ArgumentParser, *, go: bool = True) -> None:
    """`--plan`, and `--go` where the command can set a budget, of every command that
    calls models."""
    group = parser.add_argument_group("cost control")
    group.add_argument(
        "--plan",
        nargs="?",
        type=Path,
        const=Path(PLAN_FILE),
        metavar="FILE",
        help="call nothing: print what the run would call, already holds and cost, and "
        f"write it as JSON (default {PLAN_FILE}); the store is only read",
    )
    if not go:
        return
    group.add_argument(
        "--go",
        action="store_true",
        help="start even where the plan says a budget would be exceeded (the budget still "
        "stops the calls when it is reached)",
    )


def model_budget(text: str) -> tuple[str, float]:
    """SPEC=USD: a model's own cost cap (the last '=' splits: a spec may hold one)."""
    spec, sign, usd = text.rpartition("=")
    try:
        value = float(usd)
    except ValueError:
        value = math.nan
    if not sign or not spec.strip() or not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not SPEC=USD (a model spec and its budget in US dollars, 0 or more, "
            "e.g. openai:gpt-4o=5)"
        )
    return spec.strip(), value


def plan_first(
    args: argparse.Namespace,
    console: Console,
    settings: EngineSettings,
    specs: Sequence[ModelSpec],
    work: Callable[[Engine], Awaitable[object]],
    *,
    command: str,
    files: dict[str, Path | None],
    base: Path | None = None,
) -> bool:
    """With --plan: plan the run (`work` on an engine that sends nothing; it must write
    nothing either), print the plan and write it (never over one of the command's
    `files`, its inputs and outputs by what they are); True: the command ends there.
    Without it, a run with a budget is planned first and refused where the plan exceeds
    a budget, unless --go; False: go on and run."""
    if args.plan is None and (args.go or not settings.budgeted):
        return False
    from eigenjury.engine.runner import plan_run, refuse_over_budget

    if args.plan is not None:
        check_plan_file(args.plan, {**files, "store": settings.store_path(base)})
    plan = plan_run(settings, specs, work, command=command, base=base)
    if args.plan is None:
        refuse_over_budget(plan)
        return False
    show_plan(console, plan, args.plan)
    return True


def check_plan_file(path: Path, files: dict[str, Path | None]) -> None:
    """Refuse a --plan file that is one of the command's `files` (named by what they
    are), a folder, or an existing file that is not an earlier plan: a plan never
    replaces a store, a result or an input."""
    from eigenjury.records import is_kind

    check_output(path, files, "--plan")
    if path.exists() and not is_kind(path, "plan"):
        raise InputError(
            "this file exists and is not an earlier plan; give --plan a new file (a plan "
            "is written only over a plan)",
            path=path,
        )


def show_plan(console: Console, plan: PlanRecord, path: Path) -> None:
    """The plan printed, and written to `path`."""
    from eigenjury.records import write_record
    from eigenjury.reports.accounting import print_plan

    print_plan(console, plan)
    write_record(path, plan)
    console.print(f"wrote the plan to {escape(str(path))}; nothing was called", highlight=False)


def backend_name(text: str) -> str:
    """A registered backend's name. Checked when given, not in the choices: listing them
    reads every installed package's metadata, a tenth of every command's start."""
    names = backend_names()
    if text not in names:
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}; use one of {', '.join(names)}")
    return text


def add_backend_options(group: Any) -> None:
    group.add_argument(
        "--backend",
        type=backend_name,
        default="local",
        metavar="NAME",
        help="where calls run: local (default); batch-api (OpenAI's and Anthropic's models "
        "through their batch APIs: half price, answered within 24 hours, resumed by a rerun); "
        "or a registered backend such as ray (on a Ray cluster: the ray extra)",
    )
    group.add_argument("--ray-address", help="a Ray cluster to join (default: start a local one)")
    group.add_argument(
        "--batch-poll-s",
        type=bounded(float, 0.0, open_low=True),
        default=60.0,
        metavar="S",
        help="batch-api: the longest wait between two polls of an open batch (default 60)",
    )


def engine_settings(args: argparse.Namespace) -> EngineSettings:
    """The engine options of a command as settings (their ranges were checked by argparse)."""
    given = {k: v for k, v in vars(args).items() if k in EngineSettings.model_fields}
    budgets = given.get("budget_usd_by_model") or ()
    given["budget_usd_by_model"] = dict(budgets)
    if len(given["budget_usd_by_model"]) < len(budgets):
        twice = next(s for s, _ in budgets if sum(t == s for t, _ in budgets) > 1)
        raise InputError(f"{twice} has two budgets; give each model one", field="--budget-model")
    paths = {k: str(given[k]) for k in ("store", "prices") if given.get(k) is not None}
    try:
        return EngineSettings(**{**given, **paths})
    except ValidationError as exc:  # a setting whose range its option does not check
        error = exc.errors()[0]
        option = "--" + str(error["loc"][0]).replace("_", "-")
        raise InputError(error["msg"].removeprefix("Value error, "), field=option) from None


def store_path(args: argparse.Namespace) -> Path:
    """The store a command's --store names (the per-user default when none)."""
    store: Path = args.store.expanduser() if args.store else default_store()
    return store


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, existing or still to be made (through links and
    hard links too)."""
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except OSError:  # one of them is not there (yet): the names were compared
        return False


def check_output(out: Path, inputs: dict[str, Path | None], option: str = "--out") -> None:
    """Refuse, before any call is made, an output path that is a folder, a named pipe or
    a device (files.output_target), or that would overwrite one of the command's inputs
    (named by what they are in `inputs`; an input not given is None)."""
    if out.is_dir():
        raise InputError(
            f"this is a folder where a file is to be written; give {option} another path",
            path=out,
        )
    output_target(out)
    above = blocking_file(out.absolute().parent)
    if above is not None:
        raise InputError(
            f"{above} is a file, so nothing can be written under it; give {option} another path",
            path=out,
        )
    for what, path in inputs.items():
        if path is not None and _same_file(out, path):
            raise InputError(
                f"this is also the {what}: writing the results here would overwrite it; "
                f"give {option} another path",
                path=out,
            )


def add_judgment_options(parser: argparse.ArgumentParser) -> None:
    """Options of every command that reads a verdict or battle file."""
    parser.add_argument("--criterion", help="use only the rows of this criterion")
    parser.add_argument(
        "--pool-judges",
        action="append",
        default=[],
        metavar="PATTERN",
        help="merge the judges whose names match this shell-style pattern (e.g. "
        "'arena_user_*') into one judge named by it: a crowd of voters with a few votes "
        "each becomes one external judge; repeatable",
    )


def read_judgments(
    args: argparse.Namespace,
    collapse: Collapse = "rows",
    features: Features = "available",
    *,
    strong_weight: float = 3.0,
) -> VerdictTable:
    """The verdicts of `args.verdicts` with the options of `add_judgment_options`, and
    the replies' `features`, strong graded verdicts at `strong_weight` (see
    `read_verdicts`)."""
    from eigenjury.stats.verdicts import pool_judges
    from eigenjury.verdict_files import read_verdicts

    table = read_verdicts(
        args.verdicts,
        criterion=args.criterion,
        collapse=collapse,
        features=features,
        strong_weight=strong_weight,
    )
    for pattern in args.pool_judges:
        with located(args.verdicts, field="--pool-judges"):
            table = pool_judges(table, pattern)
    return table


def add_ci_option(parser: argparse.ArgumentParser) -> None:
    """`--ci`, the coverage of every bootstrap interval a command reports."""
    parser.add_argument(
        "--ci",
        type=bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.95,
        help="interval coverage (default 0.95)",
    )
