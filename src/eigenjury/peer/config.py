"""The run config of `eigenjury rank`: who is ranked, against what, on what, and how.

Validated field by field; an error names the file, line and field. Relative paths
(output, engine.store, engine.prices, and constitution, scenario and question files)
are resolved against the config file's folder, so a run finds its store and outputs
again from whatever folder it is started; `rank --out` is relative to where you are.
Numbers must be finite and seeds whole numbers from 0 up.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eigenjury.config import located
from eigenjury.engine.settings import EngineSettings
from eigenjury.models.spec import ModelSpec, SpecError
from eigenjury.models.verdict_format import VerdictFormat
from eigenjury.names import name_problem
from eigenjury.peer.answers import ERROR_MARKERS
from eigenjury.peer.settings import FitSettings, Seed
from eigenjury.reply_features import DEFAULT_FEATURES
from eigenjury.stats.bootstrap import rounds_problem

DEFAULT_GROUP_SIZE = 4  # the EigenBench design: 4 evaluees, 12 ordered pairs per scenario


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Generation(_Strict):
    """Sampling parameters for one role."""

    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: Seed | None = 0


# Providers that score a given reply's likelihood (choices with logprobs).
LIKELIHOOD_PROVIDERS = ("local",)
# Providers that continue a begun reply (a last assistant message) rather than answer it.
CONTINUING_PROVIDERS = ("local", "anthropic", "scripted")


def _checked_spec(value: str | dict[str, Any]) -> str | dict[str, Any]:
    try:
        ModelSpec.from_value(value)
    except SpecError as exc:  # as a ValueError, so the error names file, line and field
        raise ValueError(exc.message) from None
    return value


class AnswerSource(_Strict):
    """Where a member's given answers are: a file or folder (peer.answers reads the
    formats), and which model's answers where it holds several (default: the member's
    name, or the one model it holds)."""

    path: str = Field(min_length=1)
    model: str | None = Field(None, min_length=1)


class AnswerRules(_Strict):
    """What happens to a given answer that is empty, or a harness's error marker: for
    empty answers `judge` (judges read it as it is, as Arena-Hard and AlpacaEval do; the
    default), `loss` (it loses every comparison, with no judge call, two such tie:
    counted in the win rates, left out of the fit, which models judges), or `exclude`
    (its comparisons are left out, and counted)."""

    empty: Literal["loss", "exclude", "judge"] = "judge"
    errors: Literal["loss", "exclude"] = "exclude"
    error_markers: list[Annotated[str, Field(min_length=1)]] = list(ERROR_MARKERS)


class Member(_Strict):
    """A member of the population: a model, optionally in character, or answers it
    already gave (`answers`: read, never generated; such a member judges only if it
    also has a model). `opening`: the words each of its replies begins with, which the
    model continues (small models follow a persona's instructions loosely, but keep the
    tone of a reply begun for them); part of the reply the judges read. `evaluee_only`
    (true, or the reason, which the report shows): a model that cannot judge is still
    ranked."""

    name: str = Field(min_length=1)
    model: str | dict[str, Any] | None = None
    answers: str | AnswerSource | None = None
    persona: str | None = None
    opening: str | None = Field(None, min_length=1)
    evaluee_only: bool | Annotated[str, Field(min_length=1)] = Field(
        False, description="true, or why: the member is judged but never judges"
    )

    @field_validator("name")
    @classmethod
    def _name_reads_back(cls, value: str) -> str:
        """The name is written to verdicts.csv; it must be read back as itself."""
        problem = name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("model")
    @classmethod
    def _spec(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        return None if value is None else _checked_spec(value)

    @model_validator(mode="after")
    def _opening_continued(self) -> Member:
        if self.model is None and self.answers is None:
            raise ValueError("a member needs a model, or answers it already gave (answers: FILE)")
        if self.opening is not None and self.answers is not None:
            raise ValueError(
                "an opening begins replies the model writes; given answers are read as they are"
            )
        if self.opening is not None and self.spec.provider not in CONTINUING_PROVIDERS:
            raise ValueError(
                f"an opening needs a model that continues a begun reply "
                f"({', '.join(CONTINUING_PROVIDERS)}); {self.spec.provider} models answer "
                "it instead: remove the opening or put its tone in the persona"
            )
        return self

    @property
    def spec(self) -> ModelSpec:
        if self.model is None:
            raise ValueError(f"member '{self.name}' gives answers and has no model")
        return ModelSpec.from_value(self.model)

    @property
    def source(self) -> AnswerSource | None:
        """Where its given answers are (None: it replies through its model)."""
        if isinstance(self.answers, str):
            return AnswerSource(path=self.answers)
        return self.answers

    @property
    def judges(self) -> bool:
        return self.evaluee_only is False and self.model is not None

    @property
    def evaluee_only_reason(self) -> str | None:
        """Why the member does not judge (None when it does)."""
        if self.evaluee_only is False:
            return None if self.model is not None else "given answers, no model"
        return self.evaluee_only if isinstance(self.evaluee_only, str) else "set in the config"


class Judge(_Strict):
    """A judge that is not ranked: it judges the population and is never judged (an
    external judge). Given as a spec alone, it is named by its model."""

    name: str | None = Field(None, min_length=1)
    model: str | dict[str, Any]
    persona: str | None = None

    @field_validator("model")
    @classmethod
    def _spec(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        return _checked_spec(value)

    def member(self, name: str) -> Member:
        """As the collector holds it: a member that judges."""
        return Member(name=name, model=self.model, persona=self.persona)


class Scenarios(_Strict):
    source: str = "everyday"
    limit: int | None = Field(None, ge=1)
    seed: Seed = 0


class Sampling(_Strict):
    """How comparisons are chosen; see `eigenjury.peer.designs`. `baseline` (Arena-Hard's
    design): every member against the member named `baseline`, in both orders;
    `judges_per_group` judges each pair on each scenario."""

    design: Literal["all", "random-groups", "balanced", "adaptive", "baseline"] = "random-groups"
    baseline: str | None = Field(
        None, min_length=1, description="baseline: the member every other is compared with"
    )
    group_size: int = Field(
        DEFAULT_GROUP_SIZE,
        ge=2,
        description="evaluees per group (default 4, or the population size if smaller)",
    )
    judges_per_group: int = Field(1, ge=1)
    comparisons: int | None = Field(
        None, ge=1, description="adaptive: total judge calls to spend (default: as random-groups)"
    )
    rounds: int = Field(5, ge=1, description="adaptive: refits between batches")
    seed: Seed = 0


class Judging(_Strict):
    """How judges are asked. `mode`: one verdict per comparison ("single"), one per
    criterion ("criteria"), or "likelihood" (local judges too small to compare: each
    reply is scored by how much likelier, per token, the judge model finds it from a
    speaker who follows the constitution than from one who breaks it, and the higher
    score wins; see peer.likelihood).
    `soft`: a judge that gives label probabilities (local judges) contributes them as
    fractional verdicts; other judges give one verdict. Likelihood verdicts are single
    verdicts (scores are not probabilities), tie only on equal scores, and read no
    reflections. `verdict_format`: how served
    judges (HTTP) give a single verdict: "auto" (a JSON-schema verdict where the
    endpoint enforces one, else text), or forced "structured", "logprobs" or "text"
    (models.verdict_format); with `soft`, served judges that return log-probabilities
    give label probabilities too. `graded`: single verdicts on Arena-Hard's five points
    (A>>B, A>B, A=B, B>A, B>>A); a strong one counts as `fit.strong_weight` verdicts."""

    reflections: bool = True
    ties: bool = True
    graded: bool = False
    mode: Literal["single", "criteria", "likelihood"] = "single"
    repair: bool = True
    soft: bool = False
    verdict_format: VerdictFormat = "auto"
    evaluee: Generation = Generation(temperature=0.7, max_tokens=300)
    reflection: Generation = Generation(temperature=0.0, max_tokens=200)
    judge: Generation = Generation(temperature=0.0, max_tokens=400)

    @model_validator(mode="after")
    def _soft_needs_single(self) -> Judging:
        why = {
            "criteria": "verdicts per criterion come from a grammar, without label probabilities",
            "likelihood": "a likelihood verdict goes to the reply with the higher score, "
            "which is not a probability (peer.likelihood); drop soft",
        }
        if self.soft and self.mode in why:
            raise located(f"soft verdicts need mode 'single': {why[self.mode]}", "judging", "soft")
        if self.graded and (self.mode != "single" or self.soft):
            raise located(
                "graded verdicts are one label a comparison (mode single, without soft): "
                "how much better is not asked per criterion, read from likelihoods or spread "
                "over probabilities",
                "judging",
                "graded",
            )
        return self


class Greenbeard(_Strict):
    """A clique sharing a secret marker, told to favour responses that carry it."""

    members: list[str] = Field(min_length=1)
    marker: str = "moss-lantern"


class Objective(_Strict):
    """Objective mode: multiple-choice questions with a hidden key instead of scenarios."""

    questions: str = "general"
    limit: int | None = Field(None, ge=1)
    seed: Seed = 0


JudgeEntry = Annotated[str, Field(min_length=1)] | Judge


class RankConfig(_Strict):
    """`judges`: judges that are not ranked (external judges), each a model spec or
    {name, model, persona}. `answers`: what empty and failed given answers count as.
    The constitution defaults to kindness, or to helpfulness where members give their
    answers (benchmarks' questions ask for help, not for values)."""

    name: str | None = None
    population: list[Member]
    judges: list[JudgeEntry] = []
    answers: AnswerRules = AnswerRules()
    constitution: str | dict[str, Any] | None = None
    scenarios: Scenarios = Scenarios()
    sampling: Sampling = Sampling()
    judging: Judging = Judging()
    fit: FitSettings = FitSettings()
    engine: EngineSettings = EngineSettings()
    output: str = "eigenjury-run"
    greenbeard: Greenbeard | None = None
    objective: Objective | None = None

    @field_validator("population")
    @classmethod
    def _population(cls, members: list[Member]) -> list[Member]:
        if len(members) < 2:
            raise ValueError(
                f"peer ranking needs at least 3 members (2 with judges that are not ranked, "
                f"judges: ...), the config has {len(members)}"
            )
        names = [m.name for m in members]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"member names must be unique; repeated: {', '.join(twice)}")
        return members

    @property
    def given(self) -> bool:
        """Whether any member gives answers it already has."""
        return any(m.answers is not None for m in self.population)

    @property
    def constitution_source(self) -> str | dict[str, Any]:
        if self.constitution is not None:
            return self.constitution
        return "helpfulness" if self.given else "kindness"

    def external_judges(self) -> dict[str, Member]:
        """The judges that are not ranked, by name (a bare spec is named by its model,
        `names.short_labels`), each as a member that judges."""
        from eigenjury.names import short_labels

        specs = [
            str(ModelSpec.from_value(j if isinstance(j, str) else j.model)) for j in self.judges
        ]
        labels = short_labels(specs)
        out = {}
        for judge, label in zip(self.judges, labels, strict=True):
            if isinstance(judge, str):
                out[label] = Member(name=label, model=judge)
            else:
                out[judge.name or label] = judge.member(judge.name or label)
        return out

    @model_validator(mode="after")
    def _cross_checks(self) -> RankConfig:
        names = {m.name for m in self.population}
        judges = self.external_judges()
        if len(judges) < len(self.judges):
            raise located("two judges have one name; name them (name: ...)", "judges")
        clash = sorted(names & judges.keys())
        if clash:
            raise located(
                f"{clash[0]!r} is a member and a judge; a member judges already, or name the "
                "judge apart",
                "judges",
            )
        self._check_given(names)
        if self.objective is not None:
            opened = [i for i, m in enumerate(self.population) if m.opening is not None]
            if opened:
                raise located(
                    "objective mode asks for an option letter; a begun reply does not fit it",
                    "population",
                    opened[0],
                    "opening",
                )
        if self.greenbeard is not None:
            unknown = [n for n in self.greenbeard.members if n not in names]
            if unknown:
                raise located(
                    f"not in the population: {', '.join(unknown)}", "greenbeard", "members"
                )
        self._check_judges()
        if len(self.population) < 3 and not judges:
            raise located(
                f"peer ranking needs at least 3 members, the config has {len(self.population)}; "
                "with fewer, name judges that are not ranked (judges: ...)",
                "population",
            )
        members = len(self.population)
        if "group_size" not in self.sampling.model_fields_set:  # the default fits any population
            group_size = min(DEFAULT_GROUP_SIZE, members)
            self.sampling = self.sampling.model_copy(update={"group_size": group_size})
        grouped = self.sampling.design in ("random-groups", "balanced")
        if grouped and self.sampling.group_size > members:
            raise located(
                f"{self.sampling.group_size} exceeds the population ({members} members); "
                f"use at most {members}",
                "sampling",
                "group_size",
            )
        self._check_fit(members)
        return self

    def _check_given(self, names: set[str]) -> None:
        """Given answers fit every design but the adaptive one's choice of judges, and no
        mode that instructs or constrains the evaluees; the baseline is a member."""
        baseline = self.sampling.baseline
        if self.sampling.design == "baseline":
            if baseline is None:
                raise located(
                    "the baseline design needs the member every other is compared with",
                    "sampling",
                    "baseline",
                )
            if baseline not in names:
                raise located(
                    f"{baseline!r} is not a member; the baseline is one of "
                    f"{', '.join(sorted(names))}",
                    "sampling",
                    "baseline",
                )
        elif baseline is not None:
            raise located(
                f"a baseline is for design baseline (the design is {self.sampling.design})",
                "sampling",
                "baseline",
            )
        given = [i for i, m in enumerate(self.population) if m.answers is not None]
        if not given:
            return
        if self.sampling.design == "adaptive":
            raise located(
                "the adaptive design picks comparisons a member may have no answer to; with "
                "given answers use design all, balanced, random-groups or baseline",
                "sampling",
                "design",
            )
        if self.objective is not None:
            raise located(
                "objective mode asks each model for an option letter; given answers cannot "
                "be asked",
                "population",
                given[0],
                "answers",
            )
        if self.greenbeard is not None:
            for i in given:
                if self.population[i].name in self.greenbeard.members:
                    raise located(
                        "a greenbeard member is told to mark its replies; given answers "
                        "cannot be told",
                        "population",
                        i,
                        "answers",
                    )

    def _check_fit(self, members: int) -> None:
        """What a fit of this population can take, refused before anything is spent:
        rank measures only the default style features, from the replies; every member
        is judged, so there are no external judges to weight or damp toward."""
        from eigenjury.stats.eigentrust import damping_for

        names = [m.name for m in self.population]
        if self.fit.anchor not in ("uniform", "mean", *names):
            raise located(
                f"{self.fit.anchor!r} is not a member; use uniform, mean or a member's name",
                "fit",
                "anchor",
            )
        if self.fit.external_weight and not self.judges:
            raise located(
                "every judge of this run is a member, judged itself: there are no external "
                "judges to weight (judges: ...)",
                "fit",
                "external_weight",
            )
        try:
            damping_for(self.fit.damping, external=bool(self.judges), peers=True)
        except ValueError as exc:
            raise located(str(exc), "fit", "damping") from None
        if isinstance(self.fit.style, list):
            unknown = [name for name in self.fit.style if name not in DEFAULT_FEATURES]
            if unknown:
                known = ", ".join(DEFAULT_FEATURES)
                raise located(
                    f"{unknown[0]!r} is not a feature rank measures ({known})", "fit", "style"
                )
        if self.fit.dim > members:  # scores of m members have rank at most m
            raise located(
                f"{self.fit.dim} exceeds the population ({members} members); the latent "
                f"dimension is at most the number of members: use at most {members}",
                "fit",
                "dim",
            )
        problem = rounds_problem(self.fit.bootstrap, self.fit.ci)
        if problem:
            raise located(problem, "fit", "bootstrap")

    def cv_problem(self, scenarios: int) -> str | None:
        """Why the fit's folds cannot split `scenarios` (None: they can)."""
        if self.fit.cv <= scenarios:
            return None
        return (
            f"{self.fit.cv} folds need at least {self.fit.cv} scenarios and the run has "
            f"{scenarios}; use at most {scenarios}, or 0 (none)"
        )

    def reseeded(self, seed: int) -> RankConfig:
        """This config with every seed replaced by `seed`."""
        judging = self.judging.model_copy(
            update={
                role: getattr(self.judging, role).model_copy(update={"seed": seed})
                for role in ("evaluee", "reflection", "judge")
            }
        )
        update: dict[str, Any] = {
            "judging": judging,
            "scenarios": self.scenarios.model_copy(update={"seed": seed}),
            "sampling": self.sampling.model_copy(update={"seed": seed}),
            "fit": self.fit.model_copy(update={"seed": seed}),
        }
        if self.objective is not None:
            update["objective"] = self.objective.model_copy(update={"seed": seed})
        return self.model_copy(update=update)

    def _check_judges(self) -> None:
        """Someone judges; likelihood judges are local; designs that need every member
        as a judge get them."""
        judges = [i for i, m in enumerate(self.population) if m.judges]
        if not judges and not self.judges:
            raise located(
                "nobody judges: every member is evaluee_only or gives answers without a "
                "model; give a member a model, or name judges (judges: ...)",
                "population",
            )
        if self.judges and self.sampling.design == "adaptive":
            raise located(
                "the adaptive design chooses among the members as judges; use design all, "
                "balanced, random-groups or baseline with external judges",
                "sampling",
                "design",
            )
        if len(judges) < len(self.population) and self.sampling.design == "adaptive":
            first = next(i for i, m in enumerate(self.population) if not m.judges)
            raise located(
                "the adaptive design chooses among all members as judges; use design all, "
                "balanced or random-groups with evaluee_only members",
                "population",
                first,
                "evaluee_only",
            )
        if self.judging.mode != "likelihood":
            return
        if self.objective is not None:
            raise located(
                "objective mode compares answer letters; use mode single", "judging", "mode"
            )
        for name, judge in self.external_judges().items():
            if judge.spec.provider not in LIKELIHOOD_PROVIDERS:
                raise located(
                    f"likelihood verdicts need judges whose likelihoods can be read (local "
                    f"models); judge '{name}' is {judge.spec.provider}: use mode single",
                    "judges",
                )
        for i in judges:
            member = self.population[i]
            if member.spec.provider not in LIKELIHOOD_PROVIDERS:
                raise located(
                    f"likelihood verdicts need judges whose likelihoods can be read (local "
                    f"models); '{member.name}' is {member.spec.provider}: use mode single, "
                    "or make it evaluee_only",
                    "population",
                    i,
                    "model",
                )
