"""Trust matrices, EigenTrust (exact and power) and Elo conversion."""

from __future__ import annotations

import numpy as np
import pytest

from eigenjury.stats import eigentrust, ranks, to_elo, trust_matrix
from eigenjury.stats.eigentrust import own_scores


def _random_scores(m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(rng.normal(size=(m, 2)) @ rng.normal(size=(2, m)))


def test_trust_matrix_matches_the_definition_term_by_term() -> None:
    """T_ij = pi_ij / sum_j' pi_ij': each judge's Luce choice shares, ties left out."""
    scores = _random_scores(5, 0)
    pi = np.exp(scores)
    expected = np.zeros((5, 5))
    for i in range(5):
        for j in range(5):
            expected[i, j] = pi[i, j] / sum(pi[i, k] for k in range(5))
    np.testing.assert_allclose(trust_matrix(scores), expected, rtol=1e-12)


def test_trust_matrix_is_unaffected_by_a_per_judge_constant() -> None:
    scores = _random_scores(6, 1)
    shifted = scores + np.arange(6)[:, None] * 50.0  # large shifts must not overflow
    np.testing.assert_allclose(trust_matrix(shifted), trust_matrix(scores), rtol=1e-10)


@pytest.mark.parametrize("n", [2, 8, 32, 128])
def test_one_judge_gives_bradley_terry_elo_at_any_number_of_models(n: int) -> None:
    """With one lens the Elo gap of a pair is 400 / ln 10 times its score gap, however
    many other models stand beside it (EigenBench's tie term shrank it as n grew: 138,
    114 and 89 Elo for a 1-logit pair at n = 2, 8 and 128)."""
    rng = np.random.default_rng(n)
    scores = np.concatenate([[1.0, 0.0], rng.normal(0.0, 1.5, n - 2)])
    matrix = trust_matrix(np.tile(scores, (n, 1)))  # every judge shares one lens
    elo = to_elo(eigentrust(matrix))
    assert elo[0] - elo[1] == pytest.approx(400 / np.log(10), rel=1e-9)


@pytest.mark.parametrize("damping", [0.0, 0.15, 0.6])
def test_exact_and_power_eigentrust_agree(damping: float) -> None:
    matrix = trust_matrix(_random_scores(12, 3))
    pretrust = np.random.default_rng(4).dirichlet(np.ones(12))
    exact = eigentrust(matrix, damping=damping, pretrust=pretrust, method="exact")
    power = eigentrust(matrix, damping=damping, pretrust=pretrust, method="power")
    np.testing.assert_allclose(exact, power, atol=1e-11)
    google = (1 - damping) * matrix + damping * pretrust[None, :]
    np.testing.assert_allclose(exact @ google, exact, atol=1e-12)  # t = t G
    assert np.isclose(exact.sum(), 1.0) and np.all(exact > 0)


def test_dangling_rows_follow_the_pretrust() -> None:
    mask = np.array([True, True, False, True])
    matrix = trust_matrix(_random_scores(4, 5), judge_mask=mask)
    assert np.all(matrix[2] == 0)
    t = eigentrust(matrix)
    filled = matrix.copy()
    filled[2] = 0.25
    np.testing.assert_allclose(t @ filled, t, atol=1e-12)


def test_a_model_preferred_by_everyone_gets_the_most_trust() -> None:
    matrix = np.array([[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.2, 0.6, 0.2]])
    t = eigentrust(matrix)
    assert np.argmax(t) == 1
    np.testing.assert_allclose(t, eigentrust(matrix, method="power"), atol=1e-12)


def test_eigentrust_rejects_bad_parameters() -> None:
    matrix = np.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match="damping"):
        eigentrust(matrix, damping=1.0)
    with pytest.raises(ValueError, match="pretrust"):
        eigentrust(matrix, pretrust=np.array([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match="method"):
        eigentrust(matrix, method="magic")  # type: ignore[arg-type]


def test_elo_anchors() -> None:
    uniform = np.full(4, 0.25)
    np.testing.assert_allclose(to_elo(uniform), 1500.0)
    t = np.array([0.4, 0.3, 0.2, 0.1])
    elo = to_elo(t)
    np.testing.assert_allclose(elo, 1500 + 400 * np.log10(4 * t))
    np.testing.assert_allclose(elo[0] - elo[3], 400 * np.log10(4.0))  # 4x trust = +241 Elo
    np.testing.assert_allclose(to_elo(t, anchor="mean").mean(), 1500.0)
    anchored = to_elo(t, anchor=2, value=1000.0)
    assert anchored[2] == 1000.0
    np.testing.assert_allclose(np.diff(anchored), np.diff(elo))
    batch = to_elo(np.stack([t, t[::-1]]), anchor="mean")  # works on bootstrap draws too
    np.testing.assert_allclose(batch[1], to_elo(t[::-1], anchor="mean"))
    with pytest.raises(ValueError, match="anchor"):
        to_elo(t, anchor=7)


def test_ranks_put_the_largest_first() -> None:
    np.testing.assert_array_equal(ranks(np.array([1400.0, 1600.0, 1500.0])), [3, 1, 2])


def test_equal_ratings_share_ranks_whatever_their_last_digits() -> None:
    """Fits of models the verdicts cannot tell apart differ by ~1e-5 Elo: equal, not ordered."""
    noise = np.array([1500.0000025, 1500.0000041, 1499.9999934])
    np.testing.assert_array_equal(ranks(noise), [1, 1, 1])
    np.testing.assert_array_equal(ranks(np.array([1500.0, 1500.0, 1400.0])), [1, 1, 3])
    # a real gap, however small on the Elo scale, still orders
    np.testing.assert_array_equal(ranks(np.array([1500.02, 1500.0, 1400.0])), [1, 2, 3])


def test_a_judge_trusts_itself_on_the_lower_of_its_fitted_score_and_its_own_verdicts() -> None:
    """s_ii + min(delta_i^+, 0), delta_i^+ a bound on the judge's self-preference
    (stats.btd.self_bias_upper): a judge whose verdicts on itself say less than the
    factorisation gets the lower score; one that favours itself keeps s_ii; the other
    entries, and judges beyond the evaluees (external), are untouched."""
    scores = _random_scores(5, 4)
    delta = np.array([-2.0, 0.5, 0.0, -0.25, 3.0])
    lowered = own_scores(scores, delta)
    np.testing.assert_allclose(np.diag(lowered), np.diag(scores) + np.array([-2.0, 0, 0, -0.25, 0]))
    np.testing.assert_array_equal(
        lowered - np.diag(np.diag(lowered)), scores - np.diag(np.diag(scores))
    )
    wide = np.vstack([scores, _random_scores(5, 5)[:2]])  # two external judges' rows
    np.testing.assert_array_equal(own_scores(wide, np.r_[delta, -9.0, -9.0])[5:], wide[5:])
