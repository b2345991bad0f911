"""Synthetic populations with known truth, for tests, benchmarks and dry runs.

A population follows the low-rank BTD model: judges share a consensus lens and
differ from it by `judge_noise`; each judge has its own tie propensity and position
bias. Two departures from the model are available: per-scenario noise on response
quality (what makes verdicts within a scenario correlated) and a "greenbeard"
clique whose members favour each other's responses over everyone else's.

A population may also have a taste for style: its evaluees differ in verbosity (the
mean log length of their replies) and every judge adds `style_effect` times the
normalised length difference (stats.style) to the first reply's win logit, what style
control should find and remove.

A population may also have external judges: judges who are never judged (a person,
a crowd, a panel model outside the population), with lenses drawn like the others'.
Its evaluees may judge too (peer judges) or not; the true trust follows the rule the
estimator applies (stats.eigentrust.panel_trust).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from eigenjury.stats.eigentrust import damping_for, panel_trust, trust_matrix
from eigenjury.stats.elo import to_elo
from eigenjury.stats.style import normalised_difference
from eigenjury.stats.verdicts import FloatArray, IntArray, ReplyFeatures, VerdictTable

# Simulated replies are this many tokens long at verbosity 0 (the median).
TYPICAL_LENGTH = 300.0


@dataclass(frozen=True, eq=False)
class Population:
    """True parameters of a simulated population (one entry per model, external judges
    included; their dispositions mean nothing). `external` names the judges who are
    never judged; `peer_judges` says whether the evaluees judge too. `verbosity` (mean
    log length offset per model; None: replies carry no lengths) and `style_effect`
    (logit per unit of normalised length difference, one for all judges or one per
    model as judge) plant a taste for length."""

    models: tuple[str, ...]
    lenses: FloatArray
    dispositions: FloatArray
    tie_propensity: FloatArray
    position_bias: FloatArray
    greenbeard: np.ndarray  # bool mask of clique members
    greenbeard_bonus: float = 0.0
    external: tuple[str, ...] = ()
    peer_judges: bool = True
    verbosity: FloatArray | None = None
    style_effect: float | FloatArray = 0.0

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def external_mask(self) -> np.ndarray:
        return np.array([name in self.external for name in self.models], dtype=bool)

    @property
    def evaluees(self) -> tuple[str, ...]:
        """The models that are judged, in order (what trust and Elo are over)."""
        return tuple(name for name in self.models if name not in self.external)

    def judge_indices(self) -> IntArray:
        """The models that judge: the external judges, and the evaluees if they judge."""
        return np.flatnonzero(self.external_mask | self.peer_judges)

    def trust(
        self,
        *,
        damping: float | None = None,
        external_weights: Mapping[str, float] | None = None,
    ) -> FloatArray:
        """The trust vector over the evaluees implied by the honest (non-greenbeard)
        parameters, by the estimator's rule (damping None: its default; external judges
        weighted 1 unless `external_weights` says otherwise)."""
        external = self.external_mask
        evaluees, panel = np.flatnonzero(~external), np.flatnonzero(external)
        judging = np.zeros(self.n_models, dtype=bool)
        judging[self.judge_indices()] = True
        matrix = trust_matrix(
            self.lenses @ self.dispositions.T, judge_mask=judging, evaluees=evaluees
        )
        weights = external_weights or {}
        return panel_trust(
            matrix,
            evaluees,
            panel,
            np.array([weights.get(self.models[i], 1.0) for i in panel]),
            damping=damping_for(damping, external=panel.size > 0, peers=self.peer_judges),
        )

    def elo(
        self,
        *,
        damping: float | None = None,
        external_weights: Mapping[str, float] | None = None,
    ) -> FloatArray:
        return to_elo(self.trust(damping=damping, external_weights=external_weights))

    def to_dict(self) -> dict[str, Any]:
        """The population as JSON; `external` and `peer_judges` only when it has
        external judges, `verbosity` and `style_effect` only with verbosity."""
        out = {
            "models": list(self.models),
            "lenses": self.lenses.tolist(),
            "dispositions": self.dispositions.tolist(),
            "tie_propensity": self.tie_propensity.tolist(),
            "position_bias": self.position_bias.tolist(),
            "greenbeard": [m for m, g in zip(self.models, self.greenbeard, strict=True) if g],
            "greenbeard_bonus": self.greenbeard_bonus,
        }
        if self.external:
            out |= {"external": list(self.external), "peer_judges": self.peer_judges}
        if self.verbosity is not None:
            effect = np.asarray(self.style_effect, dtype=np.float64)
            out |= {"verbosity": self.verbosity.tolist(), "style_effect": effect.tolist()}
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Population:
        """The population `to_dict` wrote; a ValueError saying what is wrong with `data`
        otherwise (a missing key, a shape that does not fit, a number that is not finite)."""
        if not isinstance(data, dict):
            raise ValueError("the population is not a mapping")
        needed = ("models", "lenses", "dispositions", "tie_propensity", "position_bias")
        missing = [key for key in needed if key not in data]
        if missing:
            raise ValueError(f"the population lacks {', '.join(missing)}")
        models = data["models"]
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise ValueError("models must be a list of names")
        if len(set(models)) != len(models) or len(models) < 2:
            raise ValueError("models must name at least 2 models, each once")
        m = len(models)
        shapes = {"lenses": 2, "dispositions": 2, "tie_propensity": 1, "position_bias": 1}
        arrays = {key: _finite_array(data[key], key, ndim) for key, ndim in shapes.items()}
        if arrays["lenses"].shape != arrays["dispositions"].shape or len(arrays["lenses"]) != m:
            raise ValueError("lenses and dispositions must each have one row per model, alike")
        if len(arrays["tie_propensity"]) != m or len(arrays["position_bias"]) != m:
            raise ValueError("tie_propensity and position_bias must have one number per model")
        if (arrays["tie_propensity"] < 0).any():
            raise ValueError("tie_propensity must not be negative")
        members = data.get("greenbeard", [])
        if not isinstance(members, list) or not set(members) <= set(models):
            raise ValueError("greenbeard must list some of the models")
        bonus = data.get("greenbeard_bonus", 0.0)
        if not isinstance(bonus, int | float) or not math.isfinite(bonus):
            raise ValueError("greenbeard_bonus must be a finite number")
        external = data.get("external", [])
        if not isinstance(external, list) or not set(external) <= set(models):
            raise ValueError("external must list some of the models")
        if len(models) - len(set(external)) < 2:
            raise ValueError("a population needs at least 2 models that are not external judges")
        peer_judges = data.get("peer_judges", True)
        if not isinstance(peer_judges, bool) or not (peer_judges or external):
            raise ValueError(
                "peer_judges must be true or false, and false only with external judges"
            )
        if set(external) & set(members):
            raise ValueError("external judges are never judged, so they cannot be greenbeards")
        verbosity = None
        if "verbosity" in data:
            verbosity = _finite_array(data["verbosity"], "verbosity", 1)
            if len(verbosity) != m:
                raise ValueError("verbosity must have one number per model")
        effect: float | FloatArray = 0.0
        if isinstance(data.get("style_effect"), list):
            effect = _finite_array(data["style_effect"], "style_effect", 1)
            if len(effect) != m:
                raise ValueError("style_effect must be one number, or one per model")
        elif "style_effect" in data:
            effect = data["style_effect"]
            if not isinstance(effect, int | float) or not math.isfinite(effect):
                raise ValueError("style_effect must be a finite number")
            effect = float(effect)
        return cls(
            tuple(models),
            arrays["lenses"],
            arrays["dispositions"],
            arrays["tie_propensity"],
            arrays["position_bias"],
            np.array([name in members for name in models]),
            float(bonus),
            tuple(name for name in models if name in external),
            peer_judges,
            verbosity,
            effect,
        )


def _finite_array(value: Any, key: str, ndim: int) -> FloatArray:
    """`value` as a float array of `ndim` dimensions, or a ValueError naming `key`."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must hold numbers only") from None
    if array.ndim != ndim or array.size == 0:
        raise ValueError(f"{key} must be a {'table' if ndim == 2 else 'list'} of numbers")
    if not np.isfinite(array).all():
        raise ValueError(f"{key} must hold finite numbers (not NaN or Infinity)")
    return array


def make_population(
    n_models: int = 8,
    dim: int = 2,
    *,
    tie: float = 0.5,
    position_bias: float = 0.3,
    judge_noise: float = 0.5,
    greenbeard: int = 0,
    greenbeard_bonus: float = 2.0,
    external: int = 0,
    peer_judges: bool = True,
    verbosity: float = 0.0,
    style_effect: float | FloatArray = 0.0,
    seed: int | None = 0,
) -> Population:
    """Draw a population: dispositions N(0, I); lenses = consensus lens + judge_noise N(0, I).

    tie: typical tie propensity lambda (each judge's varies by a log-normal factor);
    position_bias: typical first-slot log-odds advantage; greenbeard: how many models
    (the last ones) form the clique; external: how many external judges to add after
    the `n_models` evaluees (lenses, ties and biases drawn alike, after everything
    else, so the evaluees' draws do not depend on it); peer_judges: whether the
    evaluees judge too; verbosity: the spread (standard deviation) of the evaluees' mean
    log reply length (0: replies carry no lengths), drawn last; style_effect: what
    every judge adds to the first reply's win logit per unit of normalised length
    difference (one number, or one per model as judge; needs verbosity).
    """
    if n_models < 2:
        raise ValueError(f"a population needs at least 2 models, got {n_models}")
    if not 0 <= greenbeard <= n_models:
        raise ValueError(f"greenbeard must lie in [0, {n_models}], got {greenbeard}")
    if tie < 0 or judge_noise < 0:
        raise ValueError("tie and judge_noise must be non-negative")
    if external < 0 or not (peer_judges or external):
        raise ValueError("external must be >= 0, and at least 1 when the evaluees do not judge")
    if verbosity < 0 or (np.any(style_effect) and not verbosity):
        raise ValueError("verbosity must be >= 0, and positive for a style_effect")
    rng = np.random.default_rng(seed)
    consensus = np.zeros(dim)
    consensus[0] = 1.0

    def draw_lenses(k: int) -> FloatArray:
        return consensus + judge_noise * rng.standard_normal((k, dim))

    def draw_ties(k: int) -> FloatArray:
        return tie * np.exp(0.3 * rng.standard_normal(k))

    def draw_biases(k: int) -> FloatArray:
        return position_bias + 0.5 * abs(position_bias) * rng.standard_normal(k)

    lenses = draw_lenses(n_models)
    dispositions = rng.standard_normal((n_models, dim))
    ties = draw_ties(n_models)
    bias = draw_biases(n_models)
    width = len(str(n_models - 1))
    models = tuple(f"model-{i:0{width}d}" for i in range(n_models))
    clique = np.zeros(n_models + external, dtype=bool)
    clique[n_models - greenbeard : n_models] = True
    panel = tuple(f"judge-{i:0{len(str(external - 1))}d}" for i in range(external))
    if external:
        lenses = np.vstack([lenses, draw_lenses(external)])
        dispositions = np.vstack([dispositions, np.zeros((external, dim))])
        ties = np.append(ties, draw_ties(external))
        bias = np.append(bias, draw_biases(external))
    verbose = None
    if verbosity:
        verbose = np.zeros(n_models + external)
        verbose[:n_models] = verbosity * rng.standard_normal(n_models)
    return Population(
        models + panel,
        lenses,
        dispositions,
        ties,
        bias,
        clique,
        greenbeard_bonus if greenbeard else 0.0,
        panel,
        peer_judges,
        verbose,
        style_effect,
    )


def simulate_verdicts(
    population: Population,
    *,
    n_scenarios: int = 1000,
    group_size: int = 4,
    judges_per_scenario: int = 1,
    scenario_noise: float = 0.0,
    length_noise: float = 0.5,
    soft: bool = False,
    seed: int | None = 0,
) -> VerdictTable:
    """The random-groups design: per scenario, `group_size` evaluees and
    `judges_per_scenario` judges drawn from all who judge (a judge may judge itself),
    every ordered pair judged by every judge. With the population's verbosity, each
    reply has a length in tokens (log-normal around its evaluee's verbosity, spread
    `length_noise`, drawn from a stream of its own), the table's "length" feature.
    `soft`: calibrated judges, whose soft verdicts (the table's `probs`) are the model's
    own label probabilities; the verdict is still the draw from them, the same draw as
    without `soft`."""
    m = population.n_models
    evaluees = np.flatnonzero(~population.external_mask)
    pool = population.judge_indices()
    if not 2 <= group_size <= len(evaluees):
        raise ValueError(f"group_size must lie in [2, {len(evaluees)}], got {group_size}")
    if n_scenarios < 1 or judges_per_scenario < 1:
        raise ValueError("n_scenarios and judges_per_scenario must be at least 1")
    rng = np.random.default_rng(seed)
    drawn = np.argsort(rng.random((n_scenarios, len(evaluees))), axis=1)[:, :group_size]
    groups = evaluees[drawn]
    judges = pool[rng.integers(len(pool), size=(n_scenarios, judges_per_scenario))]
    a, b = np.nonzero(~np.eye(group_size, dtype=bool))  # ordered pairs within a group
    per_scenario = judges_per_scenario * len(a)
    scenario = np.repeat(np.arange(n_scenarios), per_scenario)
    judge = np.repeat(judges, len(a), axis=1).ravel()
    first = np.tile(groups[:, a], (1, judges_per_scenario)).ravel()
    second = np.tile(groups[:, b], (1, judges_per_scenario)).ravel()

    scores = population.lenses @ population.dispositions.T
    s1, s2 = scores[judge, first], scores[judge, second]
    if scenario_noise > 0:
        quality = scenario_noise * rng.standard_normal((n_scenarios, m))
        s1 = s1 + quality[scenario, first]
        s2 = s2 + quality[scenario, second]
    if population.greenbeard.any():
        clique = population.greenbeard
        favour = clique[judge] & (clique[first] != clique[second])
        s1 = s1 + population.greenbeard_bonus * (favour & clique[first])
        s2 = s2 + population.greenbeard_bonus * (favour & clique[second])
    half = 0.5 * population.position_bias[judge]
    features = None
    if population.verbosity is not None:
        style_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        log_length = population.verbosity + length_noise * style_rng.standard_normal(
            (n_scenarios, m)
        )
        length = np.round(TYPICAL_LENGTH * np.exp(log_length))
        features = ReplyFeatures(
            ("length",), length[scenario, first][:, None], length[scenario, second][:, None]
        )
        difference = normalised_difference(features.first[:, 0], features.second[:, 0])
        effect = np.broadcast_to(np.asarray(population.style_effect, dtype=np.float64), (m,))
        half = half + 0.5 * effect[judge] * difference
    with np.errstate(divide="ignore"):  # a tie propensity of 0: log 0 = -inf, never a tie
        log_tie = np.log(population.tie_propensity[judge])
    logits = np.stack([log_tie + 0.5 * (s1 + s2), s1 + half, s2 - half], axis=1)
    logits -= logits.max(axis=1, keepdims=True)
    prob = np.exp(logits)
    prob /= prob.sum(axis=1, keepdims=True)
    cum = np.cumsum(prob, axis=1)
    u = rng.random(len(judge))
    verdict = (u > cum[:, 0]).astype(np.int64) + (u > cum[:, 1])
    width = len(str(n_scenarios - 1))
    return VerdictTable(
        scenario=scenario,
        judge=judge,
        first=first,
        second=second,
        verdict=verdict,
        models=population.models,
        scenarios=tuple(f"s{i:0{width}d}" for i in range(n_scenarios)),
        weight=np.ones(len(judge)),
        features=features,
        probs=prob if soft else None,
    )


def recovery(
    true_trust: FloatArray,
    trust: FloatArray,
    true_elo: FloatArray,
    elo: FloatArray,
    elo_ci: FloatArray | None = None,
) -> dict[str, float | None]:
    """How well a fit recovered a known truth: Kendall tau of trust (None where a side
    is constant and tau is undefined), Elo error, coverage."""
    from scipy.stats import kendalltau  # scipy.stats costs ~1 s to import; only needed here

    tau = float(kendalltau(true_trust, trust).statistic)
    out: dict[str, float | None] = {
        "kendall_tau": tau if math.isfinite(tau) else None,
        "max_abs_elo_error": float(np.max(np.abs(elo - true_elo))),
    }
    if elo_ci is not None:
        inside = (elo_ci[:, 0] <= true_elo) & (true_elo <= elo_ci[:, 1])
        out["elo_ci_coverage"] = float(np.mean(inside))
    return out
