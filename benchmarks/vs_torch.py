"""eigenjury's LowRankBTD against the original EigenBench-style fit in PyTorch.

The baseline is written here from the method's description: lenses U, dispositions
V and a log tie propensity per judge, softmax over the logits
[log lambda_i + (s_ij + s_ik) / 2, s_ij, s_ik], cross-entropy over single verdict
rows, Adam (lr 1e-3, fused), batch 32, reshuffled every epoch, until the epoch's
training loss improves by less than 1e-4 (relative) for 3 epochs in a row or the
epoch cap is hit. Both methods see the same 80% of scenarios and are scored on the
same held-out 20% (mean log-likelihood per verdict). The oracle row scores the
true parameters. eigenjury's time includes the collapse to counts. Timings are
repeated (best / median wall seconds, median CPU seconds; torch repeats the same
seeded run). Speed-ups divide torch's median by eigenjury's median. The last
eigenjury variant shows what the default restarts cost: one start instead of 4.

    python benchmarks/vs_torch.py [--quick]
"""

from __future__ import annotations

import argparse
import math
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from _common import environment, spread, table, timed_cpu
from eigenjury.stats import (
    LowRankBTD,
    Population,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    davidson_nll,
    make_population,
    scenario_folds,
    simulate_verdicts,
)

BATCH, LR, REL_TOL, PATIENCE = 32, 1e-3, 1e-4, 3
VARIANTS: dict[str, dict[str, Any]] = {  # LowRankBTD options
    "eigenjury position_bias=False": {"position_bias": False},
    "eigenjury default (position_bias=True)": {},
    "eigenjury position_bias=False, restarts=1": {"position_bias": False, "restarts": 1},
}


def torch_logits(
    params: list[torch.Tensor], judge: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> torch.Tensor:
    lenses, dispositions, log_tie = params
    u = lenses[judge]
    s1 = (u * dispositions[first]).sum(-1)
    s2 = (u * dispositions[second]).sum(-1)
    return torch.stack([log_tie[judge] + 0.5 * (s1 + s2), s1, s2], dim=-1)


def torch_fit(
    rows: np.ndarray, n_models: int, dim: int, max_epochs: int, seed: int
) -> tuple[list[torch.Tensor], int, float]:
    """Train on rows (judge, first, second, verdict); return params, epochs, last loss."""
    torch.manual_seed(seed)
    data = torch.from_numpy(rows)
    params = [
        torch.nn.Parameter(torch.randn(n_models, dim)),  # nn.Embedding's default init
        torch.nn.Parameter(torch.randn(n_models, dim)),
        torch.nn.Parameter(torch.zeros(n_models)),
    ]
    optimiser = torch.optim.Adam(params, lr=LR, fused=True)
    losses: list[float] = []
    stalled = 0
    for _ in range(max_epochs):
        total = torch.zeros(())
        for batch in data[torch.randperm(len(data))].split(BATCH):
            judge, first, second, verdict = batch.unbind(1)
            loss = functional.cross_entropy(torch_logits(params, judge, first, second), verdict)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.detach() * len(verdict)
        losses.append(total.item() / len(data))
        if len(losses) > 1 and (losses[-2] - losses[-1]) / losses[-2] < REL_TOL:
            stalled += 1
        else:
            stalled = 0
        if stalled >= PATIENCE:
            break
    return params, len(losses), losses[-1]


def torch_heldout(params: list[torch.Tensor], rows: np.ndarray) -> float:
    with torch.no_grad():
        p64 = [p.detach().double() for p in params]
        judge, first, second, verdict = torch.from_numpy(rows).unbind(1)
        logp = functional.log_softmax(torch_logits(p64, judge, first, second), dim=-1)
        return float(logp.gather(1, verdict[:, None]).mean())


def eigenjury_fit(
    table_: VerdictTable, held: np.ndarray, options: dict[str, Any]
) -> tuple[LowRankBTD, float]:
    data = ScenarioCounts.from_table(table_)
    train, test = data.counts(1.0 - held), data.counts(held)
    model = LowRankBTD(2, **options).fit(train)
    return model, model.loglik(test) / test.total


def oracle_heldout(population: Population, test: VerdictCounts) -> float:
    scores = population.lenses @ population.dispositions.T
    j = test.judge
    nll = davidson_nll(
        scores[j, test.first],
        scores[j, test.second],
        np.log(population.tie_propensity[j]),
        population.position_bias[j],
        test.n,
    )[0]
    return -nll / test.total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=5, help="eigenjury timing repeats")
    parser.add_argument("--torch-repeat", type=int, default=2, help="torch timing repeats")
    parser.add_argument("--max-epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    sizes = [20_000] if args.quick else [20_000, 100_000]
    repeat, torch_repeat = (1, 1) if args.quick else (args.repeat, args.torch_repeat)
    max_epochs = 3 if args.quick else args.max_epochs
    torch.set_num_threads(1)

    population = make_population(20, 2, seed=args.seed)
    rows = []
    for size in sizes:
        n_scenarios = math.ceil(size / 12)
        verdicts = simulate_verdicts(population, n_scenarios=n_scenarios, seed=args.seed + 1)
        held = (scenario_folds(n_scenarios, 5, seed=args.seed) == 0).astype(np.float64)
        in_test = held[verdicts.scenario] > 0
        cols = np.stack([verdicts.judge, verdicts.first, verdicts.second, verdicts.verdict], 1)

        wall: dict[str, list[float]] = {k: [] for k in VARIANTS}
        cpu: dict[str, list[float]] = {k: [] for k in VARIANTS}
        for _ in range(repeat):
            for name, options in VARIANTS.items():
                fit = partial(eigenjury_fit, verdicts, held, options)
                seconds, cpu_s, _ = timed_cpu(fit)
                wall[name].append(seconds)
                cpu[name].append(cpu_s)
        torch_wall, torch_cpu = [], []
        for _ in range(torch_repeat):
            seconds, cpu_s, (params, epochs, loss) = timed_cpu(
                partial(torch_fit, cols[~in_test], 20, 2, max_epochs, args.seed)
            )
            torch_wall.append(seconds)
            torch_cpu.append(cpu_s)
        wall_t, cpu_t = float(np.median(torch_wall)), float(np.median(torch_cpu))
        capped = " (cap hit)" if epochs >= max_epochs else ""
        label = f"{len(verdicts):,} ({int((~in_test).sum()):,} train)"
        rows.append(
            [
                label,
                "torch Adam, batch 32",
                spread(torch_wall),
                f"{cpu_t:.3g}",
                f"{epochs} epochs{capped}, train loss {loss:.4f}",
                f"{torch_heldout(params, cols[in_test]):.5f}",
                "",
                "",
            ]
        )
        for name, options in VARIANTS.items():
            model, ll = eigenjury_fit(verdicts, held, options)
            rows.append(
                [
                    label,
                    name,
                    spread(wall[name]),
                    f"{np.median(cpu[name]):.3g}",
                    f"{model.n_iter_} iter, converged={model.converged_}",
                    f"{ll:.5f}",
                    f"{wall_t / np.median(wall[name]):.0f}x",
                    f"{cpu_t / np.median(cpu[name]):.0f}x",
                ]
            )
        test = ScenarioCounts.from_table(verdicts).counts(held)
        rows.append(
            [
                label,
                "oracle (true parameters)",
                "",
                "",
                "",
                f"{oracle_heldout(population, test):.5f}",
                "",
                "",
            ]
        )

    print(
        f"# eigenjury vs PyTorch (N = 20, d = 2; wall best / median of {repeat} for "
        f"eigenjury, {torch_repeat} for torch)\n"
    )
    print(environment("torch"))
    print()
    print(
        table(
            [
                "verdicts",
                "method",
                "wall s",
                "CPU s",
                "work",
                "held-out loglik / verdict",
                "speed-up (wall)",
                "speed-up (CPU)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
