"""Single-rating baselines with every judge pooled: Bradley-Terry and Davidson.

Bradley-Terry counts a tie as half a win for each side, the convention of
Arena-style leaderboards, so its ratings are comparable with theirs. Davidson
models ties explicitly with one global tie parameter (the low-rank BTD with d = 1,
one shared lens and one shared lambda). Both report Elo-scale ratings
1500 + (400 / ln 10) beta, centred on the mean.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from eigenjury.stats._threads import one_blas_thread
from eigenjury.stats.btd import davidson_nll
from eigenjury.stats.verdicts import FloatArray, VerdictCounts, tally

_ELO_PER_NAT = 400.0 / np.log(10.0)


def pair_counts(
    first: np.ndarray, second: np.ndarray, verdict: np.ndarray, n_models: int
) -> tuple[FloatArray, FloatArray]:
    """Collapse battles to (wins, ties) matrices: wins[j, k] = times j beat k."""
    m = n_models
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    key_fs = first * m + second
    key_sf = second * m + first
    wins = tally(key_fs[verdict == 1], None, m * m) + tally(key_sf[verdict == 2], None, m * m)
    ties = tally(key_fs[verdict == 0], None, m * m).reshape(m, m)
    return wins.reshape(m, m), ties + ties.T


class BradleyTerry:
    """Bradley-Terry by Newton's method on the pooled win matrix (ties = half wins).

    The log-likelihood is concave; each Newton step solves one m x m system, and a
    backtracking line search keeps every step an ascent. `l2` adds a ridge prior,
    needed only when some model wins (or loses) every comparison.

    Fitted attributes: ``strength_`` (beta, mean zero; NaN for models never
    compared, such as judges that are not evaluees), ``ratings_`` (Elo scale),
    ``n_iter_``, ``converged_``, ``loglik_``.
    """

    def __init__(self, *, l2: float = 0.0, tol: float = 1e-10, max_iter: int = 100) -> None:
        self.l2 = l2
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, wins: FloatArray, ties: FloatArray | None = None) -> BradleyTerry:
        w = np.asarray(wins, dtype=np.float64) + (0.0 if ties is None else 0.5 * ties)
        m = w.shape[0]
        games = w + w.T
        beta = np.zeros(m)
        loglik = self._loglik(beta, w)
        self.converged_ = False
        for it in range(1, self.max_iter + 1):  # noqa: B007 - n_iter_ reads it
            p = _sigmoid(beta[:, None] - beta[None, :])
            grad = w.sum(axis=1) - (games * p).sum(axis=1) - self.l2 * beta
            weight = games * p * (1.0 - p)
            hess = np.diag(weight.sum(axis=1) + self.l2) - weight  # negative Hessian
            # The all-ones direction is free (flat) when l2 = 0; pin it by adding 1 1^T.
            step = np.linalg.solve(hess + 1.0 / m, grad)
            step -= step.mean()
            t = 1.0
            while True:
                trial = beta + t * step
                trial_ll = self._loglik(trial, w)
                if trial_ll >= loglik - 1e-12 or t < 1e-8:
                    break
                t *= 0.5
            beta, loglik = trial - trial.mean(), trial_ll
            if np.max(np.abs(t * step)) < self.tol:
                self.converged_ = True
                break
        self.n_iter_ = it
        self.strength_ = _centred_on_compared(beta, games.sum(axis=1) > 0)
        self.ratings_ = 1500.0 + _ELO_PER_NAT * self.strength_
        self.loglik_ = loglik + 0.5 * self.l2 * beta @ beta  # report the unpenalised value
        return self

    def _loglik(self, beta: FloatArray, w: FloatArray) -> float:
        diff = beta[:, None] - beta[None, :]
        return float(-np.sum(w * np.logaddexp(0.0, -diff)) - 0.5 * self.l2 * beta @ beta)


class Davidson:
    """Davidson's model with one global tie parameter, by L-BFGS with analytic gradient.

    Fitted attributes: ``strength_`` (mean zero; NaN if never compared), ``ratings_``,
    ``tie_propensity_``, ``n_iter_``, ``converged_``, ``loglik_``.
    """

    def __init__(self, *, l2: float = 0.0, tol: float = 1e-10, max_iter: int = 5000) -> None:
        self.l2 = l2
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, counts: VerdictCounts) -> Davidson:
        """Fit to counts (judges pooled: the judge column is ignored)."""
        m = counts.n_models
        wins, ties = counts.pooled()
        j, k = np.nonzero(np.triu(wins + wins.T + ties, 1))
        # One cell per unordered pair; position effects are not modelled here.
        n = np.stack([ties[j, k], wins[j, k], wins[k, j]], axis=1)
        total = n.sum()

        def objective(x: FloatArray) -> tuple[float, FloatArray]:
            beta, log_tie = x[:m], x[m]
            nll, g, g_tie = davidson_nll(
                beta[j], beta[k], np.full(len(j), log_tie), np.zeros(len(j)), n
            )
            grad = tally(j, g, m) - tally(k, g, m)
            grad = np.append(grad / total + self.l2 * beta, g_tie.sum() / total)
            return nll / total + 0.5 * self.l2 * beta @ beta, grad

        with one_blas_thread():
            res = minimize(
                objective,
                np.zeros(m + 1),
                jac=True,
                method="L-BFGS-B",
                bounds=[(None, None)] * m + [(-15.0, 15.0)],
                options={"maxiter": self.max_iter, "ftol": 1e-15, "gtol": self.tol},
            )
        self.strength_ = _centred_on_compared(res.x[:m], counts.evaluee_totals() > 0)
        self.ratings_ = 1500.0 + _ELO_PER_NAT * self.strength_
        self.tie_propensity_ = float(np.exp(res.x[m]))
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success) or float(np.max(np.abs(res.jac))) < 10 * self.tol
        beta = res.x[:m]
        self.loglik_ = -(float(res.fun) - 0.5 * self.l2 * beta @ beta) * total
        return self


def _centred_on_compared(beta: FloatArray, compared: np.ndarray) -> FloatArray:
    """Mean zero over the models that were compared; NaN for those never compared."""
    out = np.full(len(beta), np.nan)
    out[compared] = beta[compared] - beta[compared].mean()
    return out


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))
