"""A-BB math: closed forms against scipy, monotonicity, consistency, the mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from eigenjury.stats.abb import (
    Utility,
    certify,
    estimate_sensitivity,
    laurent_massart_radius,
    mean_upper_bound,
    shrink_and_noise,
    tied_within,
    units_to_decide,
    upper_bound_at,
    utility_retained,
)


@pytest.mark.parametrize("dim", [1, 5, 50, 1000, 12000])
@pytest.mark.parametrize("delta", [0.2, 0.01, 1e-4])
def test_laurent_massart_radius_is_a_valid_and_reasonable_chi2_tail(dim: int, delta: float) -> None:
    radius = laurent_massart_radius(dim, delta)
    exact = sps.chi2.isf(delta, dim)  # the exact (1 - delta) quantile
    assert radius >= exact  # a valid tail bound: P[chi2 >= radius] <= delta
    assert sps.chi2.sf(radius, dim) <= delta
    if dim >= 50:  # and tight where scores are many (loose only for a handful of items)
        assert radius <= 1.25 * exact


def test_certificate_matches_the_closed_form_computed_independently() -> None:
    tau, delta, sens, dim = 0.5, 0.01, 0.01, 400
    cert = certify(tau, delta, sens, dim, alpha=0.8, delta_split=0.5, range_bound=False)
    markov = delta / 2
    x = math.log(1 / (delta / 2))
    radius = dim + 2 * math.sqrt(dim * x) + 2 * x
    expected = (tau - 0.8 * sens / math.sqrt(markov)) / math.sqrt(2 * radius)
    assert cert.feasible
    assert cert.sigma_max == pytest.approx(expected, rel=1e-12)
    assert cert.threshold == pytest.approx(0.8 * sens / math.sqrt(markov))
    # with sigma_max the noise term plus the bias term is exactly tau
    assert cert.threshold + cert.sigma_max * cert.noise_radius == pytest.approx(tau)


def test_certificate_fields_are_consistent() -> None:
    for sens in (0.0, 0.002, 0.05, 0.3, 2.0):
        for k in (1, 4):
            for centre in (0.5, "batch-mean"):
                cert = certify(
                    0.3, 0.05, sens, 200, neighbour_size=k, centre=centre, delta_sensitivity=0.01
                )
                split = cert.split
                assert split.sensitivity + split.markov + split.noise == pytest.approx(0.05)
                assert cert.bias_term == pytest.approx(
                    math.sqrt(k) if cert.bias_bound == "range" else sens / math.sqrt(split.markov)
                )
                assert cert.bias_term <= math.sqrt(k) + 1e-12  # never above the range bound
                assert cert.threshold == pytest.approx(cert.lipschitz * cert.bias_term)
                assert cert.min_alpha <= cert.alpha <= 1
                assert cert.smallest_feasible_tau <= cert.threshold + 1e-12
                assert cert.feasible == (cert.tau >= cert.threshold - 1e-12)
                if cert.feasible:
                    total = cert.threshold + cert.sigma_max * cert.noise_radius
                    assert total == pytest.approx(cert.tau)
                    assert cert.noise_radius == pytest.approx(
                        math.sqrt(2 * laurent_massart_radius(200, split.noise))
                    )


def test_range_bound_is_used_when_smaller_and_frees_delta_for_the_noise() -> None:
    loose = certify(0.5, 0.01, 0.2, 100, range_bound=False)
    tight = certify(0.5, 0.01, 0.2, 100, range_bound=True)
    assert loose.bias_bound == "markov" and loose.bias_term == pytest.approx(0.2 / math.sqrt(0.005))
    assert tight.bias_bound == "range" and tight.bias_term == 1.0
    assert tight.split.noise == 0.01 and tight.split.markov == 0.0
    assert tight.alpha > loose.alpha
    # a small sensitivity keeps the Markov step, which is then the smaller
    small = certify(0.5, 0.01, 0.01, 100)
    assert small.bias_bound == "markov"


def test_alpha_is_the_largest_that_fits_the_bias_share_of_tau() -> None:
    cert = certify(0.4, 0.01, 0.05, 300, range_bound=False, noise_share=0.5)
    assert cert.threshold == pytest.approx(0.2)  # half of tau for the bias term
    assert certify(0.4, 0.01, 0.05, 300, range_bound=False, noise_share=0.0).sigma_max == 0.0
    batch = certify(0.4, 0.01, 0.05, 300, range_bound=False, centre="batch-mean")
    assert batch.threshold == pytest.approx(0.2)
    assert batch.alpha < cert.alpha  # the centre shift costs shrinkage
    # no shrinkage needed when the judge barely moves
    assert certify(0.4, 0.01, 1e-4, 300).alpha == 1.0


@pytest.mark.parametrize("centre", [0.5, "batch-mean"])
@pytest.mark.parametrize("alpha", [0.1, 0.5, 1.0])
def test_larger_tau_or_delta_never_lowers_sigma_max(centre: str | float, alpha: float) -> None:
    taus = np.linspace(0.02, 2.0, 40)
    deltas = np.geomspace(1e-4, 0.5, 40)
    for sens in (0.0, 0.01, 0.1, 0.5):
        by_tau = [certify(t, 0.01, sens, 64, alpha=alpha, centre=centre).sigma_max for t in taus]
        by_delta = [certify(0.5, d, sens, 64, alpha=alpha, centre=centre).sigma_max for d in deltas]
        assert np.all(np.diff(by_tau) >= -1e-12)
        assert np.all(np.diff(by_delta) >= -1e-12)


@pytest.mark.parametrize("centre", [0.5, "batch-mean"])
def test_chosen_alpha_keeps_the_most_signal_and_grows_with_tau_and_delta(
    centre: str | float,
) -> None:
    taus = np.linspace(0.02, 2.0, 40)
    deltas = np.geomspace(1e-4, 0.5, 40)
    for sens in (0.0, 0.01, 0.1, 0.5):
        by_tau = [certify(t, 0.01, sens, 64, centre=centre) for t in taus]
        by_delta = [certify(0.5, d, sens, 64, centre=centre) for d in deltas]
        assert np.all(np.diff([c.alpha for c in by_tau]) >= -1e-12)
        assert np.all(np.diff([c.sigma_max for c in by_tau]) >= -1e-12)
        assert np.all(np.diff([c.alpha for c in by_delta]) >= -1e-12)
        for c in (*by_tau, *by_delta):
            other = certify(
                c.tau, c.delta, sens, 64, centre=centre, range_bound=c.bias_bound == "markov"
            )
            assert c.alpha >= other.alpha - 1e-12  # the kept step is the one with more signal
    # a sensitivity well below the range step now shapes the release
    measured = certify(0.5, 0.05, 0.05, 64)
    assert measured.bias_bound == "markov" and measured.alpha > certify(0.5, 0.05, 1.0, 64).alpha


def test_infeasible_target_names_the_smallest_feasible_tau() -> None:
    cert = certify(0.01, 0.01, 0.3, 50, min_alpha=0.1, range_bound=False)
    assert not cert.feasible and cert.sigma_max == 0.0
    assert cert.smallest_feasible_tau == pytest.approx(0.1 * 0.3 / math.sqrt(0.005))
    assert "smallest feasible tau" in cert.explain()
    assert certify(cert.smallest_feasible_tau, 0.01, 0.3, 50, range_bound=False).feasible
    # given alpha: its own threshold
    given = certify(0.5, 0.01, 0.3, 50, alpha=1.0)
    assert not given.feasible and given.smallest_feasible_tau == 1.0  # the range bound
    # batch-mean centre: a real limit even at alpha -> 0
    batch = certify(0.01, 0.01, 0.3, 4, centre="batch-mean", min_alpha=1e-9)
    assert not batch.feasible
    assert batch.smallest_feasible_tau == pytest.approx(math.sqrt(1 / 4), rel=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tau": 0.0},
        {"delta": 1.0},
        {"delta": 0.0},
        {"sensitivity": -1.0},
        {"dim": 0},
        {"neighbour_size": 11},
        {"alpha": 0.0},
        {"delta_sensitivity": 0.01},
        {"centre": 1.5},
        {"noise_share": 1.0},
    ],
)
def test_certify_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    args = {"tau": 0.5, "delta": 0.01, "sensitivity": 0.1, "dim": 10} | kwargs
    with pytest.raises(ValueError):
        certify(
            args.pop("tau"),
            args.pop("delta"),
            args.pop("sensitivity"),
            int(args.pop("dim")),
            **args,
        )  # type: ignore[arg-type]


def test_the_release_shrinks_adds_noise_and_checks_its_input() -> None:
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=500)
    cert = certify(2.0, 0.01, 0.05, 500, range_bound=False)
    out = shrink_and_noise(scores, cert, 0.0, rng)
    np.testing.assert_allclose(out, cert.alpha * scores + (1 - cert.alpha) * 0.5)
    noisy = shrink_and_noise(scores, cert, cert.sigma_max, np.random.default_rng(1))
    assert np.std(noisy - out) == pytest.approx(cert.sigma_max, rel=0.1)
    with pytest.raises(ValueError, match="expected 500"):
        shrink_and_noise(scores[:10], cert, 0.0, rng)
    with pytest.raises(ValueError, match="sigma"):
        shrink_and_noise(scores, cert, 2 * cert.sigma_max, rng)
    with pytest.raises(ValueError, match="normalised"):
        shrink_and_noise(scores * 3, cert, 0.0, rng)
    batch = certify(2.0, 0.01, 0.05, 500, centre="batch-mean")
    np.testing.assert_allclose(
        shrink_and_noise(scores, batch, 0.0, rng),
        batch.alpha * scores + (1 - batch.alpha) * scores.mean(),
    )


def test_the_old_name_debias_still_releases_and_warns() -> None:
    """Scripts of eigenjury 0.2 call `debias` (from eigenjury or eigenjury.stats): it
    gives the same release, with a warning that no bias is removed."""
    import eigenjury
    import eigenjury.stats

    scores = np.random.default_rng(0).uniform(size=50)
    cert = certify(2.0, 0.01, 0.05, 50, range_bound=False)
    for old in (eigenjury.debias, eigenjury.stats.debias):
        with pytest.warns(DeprecationWarning, match="does not remove the judge's bias"):
            released = old(scores, cert, cert.sigma_max, np.random.default_rng(3))
        np.testing.assert_array_equal(
            released, shrink_and_noise(scores, cert, cert.sigma_max, np.random.default_rng(3))
        )
    assert "debias" not in eigenjury.__all__ and "debias" not in eigenjury.stats.__all__


def test_kl_bound_covers_the_mean_at_its_confidence_and_beats_hoeffding() -> None:
    rng = np.random.default_rng(5)
    p, m, confidence = 0.05, 40, 0.9
    misses = 0
    for _ in range(400):
        values = (rng.uniform(size=m) < p).astype(float) * rng.uniform(0.5, 1.0, size=m)
        bound = mean_upper_bound(values, confidence, method="kl")
        misses += bound < p * 0.75
        assert bound <= mean_upper_bound(values, confidence, method="hoeffding")
    assert misses / 400 <= 1 - confidence
    # all zeros: 1 - (1 - confidence)^(1/m), the exact binomial bound
    zeros = mean_upper_bound(np.zeros(m), confidence, method="kl")
    assert zeros == pytest.approx(1 - (1 - confidence) ** (1 / m), rel=1e-6)
    assert mean_upper_bound(np.zeros(m), 0.9, method="bootstrap", rng=rng) == 0.0


def test_one_unit_size_is_one_sample_scaled_to_its_size() -> None:
    """Units of one size: the per-unit means are one sample, bounded at the confidence
    asked, and a neighbour editing one unit moves size x the per-item mean (as before
    units of several sizes were bounded apart)."""
    original = np.array([0.0, 0.5, 1.0, 0.25, 0.5, 0.5, 0.5, 0.5])
    perturbed = np.array([0.5, 0.5, 1.0, 0.25, 0.5, 1.0, 0.5, 0.5])
    one = estimate_sensitivity(original, perturbed, 0.95)
    assert one.estimate == pytest.approx(math.sqrt(0.5 / 8))
    assert one.upper_bound == pytest.approx(
        math.sqrt(mean_upper_bound((original - perturbed) ** 2, 0.95))
    )
    assert one.m == 8 and one.neighbour_size == 1 and len(one.strata) == 1
    units = [0, 0, 0, 0, 1, 1, 1, 1]
    four = estimate_sensitivity(original, perturbed, 0.95, units=units)
    per_unit = np.array([0.25 / 4, 0.25 / 4])
    assert four.estimate == pytest.approx(math.sqrt(4 * per_unit.mean()))
    assert four.upper_bound == pytest.approx(math.sqrt(4 * mean_upper_bound(per_unit, 0.95)))
    assert four.m == 2 and four.neighbour_size == 4


def test_each_unit_size_is_bounded_on_its_own_and_the_worst_is_certified() -> None:
    """Two units of 2 items that do not move, one of 4 that moves by 1 per item: pooled,
    the mean per item would be 1/3; bounded apart, a 4-item edit moves sqrt(4 x 1)."""
    original = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    perturbed = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    units = [0, 0, 1, 1, 2, 2, 2, 2]
    found = estimate_sensitivity(original, perturbed, 0.9, units=units, method="kl")
    small, large = found.strata
    assert (small.size, small.m, small.mean_square) == (2, 2, 0.0)
    assert (large.size, large.m, large.mean_square) == (4, 1, 1.0)
    # delta_sensitivity 0.1 split between the two sizes measured (a union bound)
    assert small.confidence == large.confidence == pytest.approx(0.95)
    assert small.upper_bound == pytest.approx(mean_upper_bound(np.zeros(2), 0.95, method="kl"))
    assert large.upper_bound == 1.0
    assert found.estimate == pytest.approx(2.0) and found.upper_bound == pytest.approx(2.0)
    assert found.neighbour_size == 4 and found.m == 3
    # a size with no measured unit rests on the range; the measured one keeps the whole
    # confidence, being the only one bounded that was measured
    wider = estimate_sensitivity(
        original, perturbed, 0.9, units=units, method="kl", neighbour_sizes=(2, 6)
    )
    two, six = wider.strata
    assert two.confidence == 0.9 and (six.m, six.mean_square, six.upper_bound) == (0, None, 1.0)
    assert six.range_only and not two.range_only
    assert wider.upper_bound == pytest.approx(math.sqrt(6)) and wider.estimate == 0.0
    assert wider.units_to_decide(0.02) is None  # no measurement of 6-item units would do
    # the declared size of a unit wins over the pairs it has (an original that failed)
    declared = estimate_sensitivity(
        original[:7], perturbed[:7], 0.9, units=units[:7], unit_sizes=[2, 2, 2, 2, 4, 4, 4]
    )
    assert [s.size for s in declared.strata] == [2, 4]
    with pytest.raises(ValueError, match="same for all its pairs"):
        estimate_sensitivity(original, perturbed, 0.9, units=units, unit_sizes=[2] * 7 + [3])
    # the bootstrap, which has no finite-sample guarantee, needs 30 units of a size
    rng = np.random.default_rng(0)
    boot = estimate_sensitivity(original, perturbed, 0.9, units=units, method="bootstrap", rng=rng)
    assert all(s.range_only for s in boot.strata)


def test_utility_is_invariant_to_shrinkage_and_undefined_for_constants() -> None:
    x = np.array([0.1, 0.4, 0.35, 0.9])
    same = utility_retained(x, 0.2 * x + 0.4)
    assert same.pearson == pytest.approx(1.0) and same.kendall == pytest.approx(1.0)
    assert utility_retained(x, np.full(4, 0.5)).spearman is None


def test_the_range_step_keeps_the_sensitivitys_share_of_delta() -> None:
    """Which step is used depends on the measured bound, so the chance that bound failed
    stays inside delta whichever step is kept."""
    cert = certify(0.5, 0.05, 0.9, 100, delta_sensitivity=0.01)
    assert cert.bias_bound == "range"
    assert cert.split.sensitivity == 0.01 and cert.split.markov == 0.0
    assert cert.split.noise == pytest.approx(0.04)
    assert cert.noise_radius == pytest.approx(math.sqrt(2 * laurent_massart_radius(100, 0.04)))


def test_the_bernstein_bound_pays_off_for_many_alike_changes_and_both_cover_the_mean() -> None:
    """A judge that moves every score a little: KL assumes the worst variance for the
    mean, the empirical Bernstein bound sees the small one; the default takes the
    smaller of the two at half the error each, and still covers the mean."""
    rng = np.random.default_rng(3)
    mean, m, confidence = 0.01, 4000, 0.95
    values = rng.uniform(0.008, 0.012, size=m)
    kl = mean_upper_bound(values, confidence, method="kl")
    bernstein = mean_upper_bound(values, confidence, method="bernstein")
    both = mean_upper_bound(values, confidence)
    assert bernstein < kl and both == pytest.approx(
        min(
            mean_upper_bound(values, 1 - (1 - confidence) / 2, method="kl"),
            mean_upper_bound(values, 1 - (1 - confidence) / 2, method="bernstein"),
        )
    )
    assert both < kl
    misses = sum(
        mean_upper_bound(rng.uniform(size=60) * (rng.uniform(size=60) < 0.1), 0.9) < 0.05
        for _ in range(300)
    )
    assert misses / 300 <= 0.1
    assert both >= mean - 1e-3  # and it covers the mean here too


def test_units_to_decide_is_where_the_measurement_first_beats_the_range_step() -> None:
    markov = 0.0125
    needed = units_to_decide(0.0, 0.0, 0.975, "kl", markov)
    assert needed is not None
    assert upper_bound_at(0.0, 0.0, needed, 0.975, "kl") < markov
    assert upper_bound_at(0.0, 0.0, needed - 1, 0.975, "kl") >= markov
    assert units_to_decide(0.02, 0.0, 0.975, "kl", markov) is None  # the mean alone is too big
    assert units_to_decide(0.0, 0.0, 0.975, "bootstrap", markov) is None


def test_a_failed_neighbour_judgment_counts_as_the_largest_change() -> None:
    original = np.array([0.5, 0.5, 0.5, 0.5])
    sensitivity = estimate_sensitivity(original, np.array([0.5, np.nan, 0.5, 0.5]), 0.95)
    assert sensitivity.failed == 1 and sensitivity.strata[0].failed == 1
    assert sensitivity.strata[0].mean_square == pytest.approx(0.25)  # 1 of 4 changed by 1
    assert sensitivity.estimate == pytest.approx(0.5)


def test_differences_within_the_tie_tolerance_are_ties() -> None:
    """Means equal up to rounding (1e-16 apart) have no order: with the tolerance they
    are ties, and a vector of them is constant, so its correlations are undefined."""
    rounded = np.array([0.5, 0.5 + 1e-16, 0.5 - 1e-16])
    np.testing.assert_array_equal(tied_within(rounded, 1e-12), [0.5 - 1e-16] * 3)
    chain = np.array([0.0, 0.6e-12, 1.2e-12, 0.3])  # a chain of small steps is one tie
    np.testing.assert_array_equal(tied_within(chain, 1e-12), [0.0, 0.0, 0.0, 0.3])
    released = np.array([0.1, 0.2, 0.3])
    assert utility_retained(rounded, released).kendall is not None  # an order of rounding
    assert utility_retained(rounded, released, tie_tolerance=1e-12) == Utility(None, None, None)
    partly = utility_retained(
        np.array([0.2, 0.5, 0.5 + 1e-16]), np.array([0.1, 0.3, 0.2]), tie_tolerance=1e-12
    )
    assert partly.kendall == pytest.approx(
        float(sps.kendalltau([0.2, 0.5, 0.5], [0.1, 0.3, 0.2]).statistic)
    )
