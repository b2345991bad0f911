"""Sampling designs: counts, both orders, balance, and stability as a population grows."""

from __future__ import annotations

from collections import Counter

from eigenjury.peer.designs import design_all, design_balanced, design_random_groups

MEMBERS = [f"m{i}" for i in range(8)]
SCENARIOS = [f"s{i:02d}" for i in range(60)]


def test_all_is_every_judge_pair_and_scenario() -> None:
    comparisons = design_all(MEMBERS[:4], SCENARIOS[:3])
    assert len(comparisons) == 4 * 12 * 3 and len(set(comparisons)) == len(comparisons)


def test_random_groups_judges_every_pair_in_both_orders() -> None:
    comparisons = design_random_groups(MEMBERS, SCENARIOS, group_size=4, judges_per_group=2)
    assert len(comparisons) == 60 * 2 * 12
    keys = {(c.scenario, c.judge, c.first, c.second) for c in comparisons}
    assert all((c.scenario, c.judge, c.second, c.first) in keys for c in comparisons)
    per_scenario = Counter(c.scenario for c in comparisons)
    assert set(per_scenario.values()) == {24}


def test_balanced_spreads_work_evenly() -> None:
    comparisons = design_balanced(MEMBERS, SCENARIOS, group_size=4)
    judged = Counter(c.judge for c in comparisons)
    evaluated = Counter(m for c in comparisons for m in (c.first, c.second))
    assert max(judged.values()) - min(judged.values()) <= 12  # at most one group apart
    assert max(evaluated.values()) - min(evaluated.values()) <= 2 * 6
    rand = design_random_groups(MEMBERS, SCENARIOS, group_size=4)
    spread = Counter(c.judge for c in rand)
    assert max(spread.values()) - min(spread.values()) > max(judged.values()) - min(judged.values())


def test_random_groups_keep_most_work_when_a_member_joins() -> None:
    before = set(design_random_groups(MEMBERS, SCENARIOS, group_size=4, seed=3))
    after = set(design_random_groups([*MEMBERS, "newcomer"], SCENARIOS, group_size=4, seed=3))
    untouched = [c for c in after if "newcomer" not in (c.judge, c.first, c.second)]
    assert len(before & after) / len(before) > 0.4
    assert set(untouched) <= before  # nothing old is re-asked in a new form


def test_logit_jacobians_and_information_factors_are_exact() -> None:
    import numpy as np

    from eigenjury.peer.adaptive import information_factors, logit_jacobians
    from eigenjury.stats.btd import BTDParams

    rng = np.random.default_rng(0)
    m, d = 5, 2
    params = BTDParams(
        rng.normal(size=(m, d)),
        rng.normal(size=(m, d)),
        rng.normal(size=m),
        rng.normal(size=m),
        rng.normal(size=m),
    )
    # judges 3 and 4 judge themselves, first and second: the self-preference columns
    judge, first, second = np.array([0, 3, 4]), np.array([1, 3, 0]), np.array([2, 4, 4])

    def logits(x: np.ndarray) -> np.ndarray:
        q = BTDParams.unpack(x, m, d)
        s = q.lenses @ q.dispositions.T
        s1, s2 = s[judge, first], s[judge, second]
        own = (judge == first).astype(float) - (judge == second)
        half = 0.5 * (q.position_bias[judge] + q.self_bias[judge] * own)
        return np.stack([q.log_tie[judge] + 0.5 * (s1 + s2), s1 + half, s2 - half], axis=1)

    x = params.pack()
    numeric = np.stack(
        [(logits(x + e) - logits(x - e)) / 2e-6 for e in np.eye(len(x)) * 1e-6], axis=-1
    )
    jac = logit_jacobians(params, judge, first, second)
    np.testing.assert_allclose(jac, numeric, atol=1e-6)
    prob = rng.dirichlet(np.ones(3), size=3)
    factors = information_factors(jac, prob)
    for n in range(3):
        fisher = jac[n].T @ (np.diag(prob[n]) - np.outer(prob[n], prob[n])) @ jac[n]
        np.testing.assert_allclose(factors[n].T @ factors[n], fisher, atol=1e-12)
