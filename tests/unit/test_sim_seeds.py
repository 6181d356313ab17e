"""``bench simulate --seeds``: one run per seed, and every number over the seeds."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pytest

from cli.argtypes import MAX_SEEDS, seed_list
from cli.main import main
from sim.config import SimConfig, SimResult
from sim.profiles import load_shipped_profiles
from sim.runner import run_policies, thesis_input
from sim.seeds import SEED_METRICS, summarize_seeds
from workloads.thesis import ThesisWorkloadConfig

SHORT = ThesisWorkloadConfig(duration_s=240.0)


def test_seed_lists_take_ranges_and_single_seeds_in_the_order_given() -> None:
    assert seed_list("1-6") == [1, 2, 3, 4, 5, 6]
    assert seed_list("7, 0-2") == [7, 0, 1, 2]
    assert seed_list("5") == [5]
    for bad in ("", "x", "1-", "-1", "3-1", "1,1", "1-3,2", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_list(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="more than"):
        seed_list(f"0-{MAX_SEEDS}")


def _runs(seeds: list[int], policies: list[str]) -> list[tuple[int, list[SimResult]]]:
    profiles = load_shipped_profiles()
    return [
        (seed, run_policies(thesis_input(seed, SHORT), policies, profiles,
                            SimConfig(policies[0], seed=seed)))
        for seed in seeds
    ]


def test_the_summary_holds_each_seeds_numbers_and_their_mean_min_and_max() -> None:
    runs = _runs([3, 4], ["energy", "spread"])
    summary = summarize_seeds(runs, queue_new=False, thesis=True)
    assert summary.seeds == (3, 4) and summary.policies == ("energy", "spread")
    for index, policy in enumerate(("energy", "spread")):
        for key in ("success_rate", "kills", "avg_cpu_util", "energy_kwh"):
            by_seed = [getattr(results[index].result.metrics, key) for _, results in runs]
            spread = summary.spreads[policy][key]
            assert list(spread.by_seed) == by_seed
            assert spread.mean == pytest.approx(statistics.fmean(by_seed))
            assert (spread.low, spread.high) == (min(by_seed), max(by_seed))
    rates = summary.spreads["energy"]["success_rate"].by_seed
    assert rates[0] != rates[1]  # two seeds, two workloads
    text = summary.render()
    energy_rate = summary.spreads["energy"]["success_rate"]
    assert (f"| success rate | {energy_rate.mean * 100:.1f}% ({energy_rate.low * 100:.1f}% - "
            f"{energy_rate.high * 100:.1f}%) (thesis 83.7%) |") in text
    assert f"| 4 | {rates[1] * 100:.1f}% |" in text
    assert "queued, still waiting" not in text  # a row of queueing runs only
    document = summary.to_json()
    assert set(document["policies"]["spread"]) == {m.key for m in SEED_METRICS
                                                   if not m.queue_only}
    assert document["policies"]["energy"]["success_rate"]["by_seed"] == list(rates)


def test_a_seed_that_ran_other_policies_is_refused() -> None:
    first = _runs([1], ["energy", "spread"])
    other = _runs([2], ["spread", "energy"])
    with pytest.raises(ValueError, match="seed 2"):
        summarize_seeds(first + other, queue_new=False, thesis=True)
    with pytest.raises(ValueError, match="no seed"):
        summarize_seeds([], queue_new=False, thesis=True)


def test_bench_simulate_seeds_runs_each_seed_as_its_own_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--workload", "thesis", "--duration-s", "180", "--policies", "energy,random",
              "--no-plots", "--jobs", "1"]
    out = tmp_path / "seeds"
    assert main(["bench", "simulate", *common, "--seeds", "2,5", "--out", str(out)]) == 0
    single = tmp_path / "single"
    assert main(["bench", "simulate", *common, "--seed", "5", "--out", str(single)]) == 0
    printed = capsys.readouterr().out
    assert "# Simulation over 2 seeds" in printed and "seed 5: success rate energy" in printed
    document = json.loads((out / "seeds.json").read_text())
    assert document["seeds"] == [2, 5]
    for seed_index, seed in enumerate((2, 5)):
        per_seed = json.loads((out / f"seed-{seed}" / "summary.json").read_text())["policies"]
        for policy in ("energy", "random"):
            for key in ("success_rate", "successful", "kills", "energy_kwh"):
                assert (document["policies"][policy][key]["by_seed"][seed_index]
                        == per_seed[policy][key]), (seed, policy, key)
    # the run of seed 5 is the run with --seed 5, but for what the wall clock measures: the
    # decision times, and the scheduling delays, which include them
    alone = json.loads((single / "summary.json").read_text())["policies"]
    within = json.loads((out / "seed-5" / "summary.json").read_text())["policies"]
    for policy in ("energy", "random"):
        assert _simulated(within[policy]) == _simulated(alone[policy])
        assert within[policy]["successful"] > 0
    assert (out / "seeds.md").read_text().startswith("# Simulation over 2 seeds")


def test_bench_simulate_seeds_of_a_trace_file_vary_the_random_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    assert main(["bench", "generate", "--seed", "1", "--duration-s", "300",
                 "--out", str(trace)]) == 0
    common = ["--trace", str(trace), "--policies", "random", "--no-plots"]
    out = tmp_path / "seeds"
    assert main(["bench", "simulate", *common, "--seeds", "8,9", "--out", str(out)]) == 0
    single = tmp_path / "single"
    assert main(["bench", "simulate", *common, "--seed", "9", "--out", str(single)]) == 0
    capsys.readouterr()
    text = (out / "seeds.md").read_text()
    assert f"Trace: {trace}, the same for every seed; seeds 8, 9" in text
    document = json.loads((out / "seeds.json").read_text())["policies"]["random"]
    # one trace, so one set of requests; the random policy's choices follow the seed
    assert document["successful"]["by_seed"][0] + document["failed"]["by_seed"][0] == \
        document["successful"]["by_seed"][1] + document["failed"]["by_seed"][1]
    assert document["avg_cpu_util"]["by_seed"][0] != document["avg_cpu_util"]["by_seed"][1]
    alone = json.loads((single / "summary.json").read_text())["policies"]["random"]
    within = json.loads((out / "seed-9" / "summary.json").read_text())["policies"]["random"]
    assert _simulated(within) == _simulated(alone)


def _simulated(numbers: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in numbers.items() if "_ms" not in k and "delay" not in k}


def test_bench_simulate_refuses_bad_seeds_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    never = tmp_path / "never"
    for extra in (["--seeds", "3-1"], ["--seeds", "two"], ["--seeds", "1,1"],
                  ["--seed", "1", "--seeds", "1-2"]):
        with pytest.raises(SystemExit) as exited:
            main(["bench", "simulate", "--workload", "thesis", *extra, "--out", str(never)])
        assert exited.value.code == 2
        assert "--seeds" in capsys.readouterr().err
    assert main(["bench", "simulate", "--workload", "thesis", "--out", str(never)]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert not never.exists()
