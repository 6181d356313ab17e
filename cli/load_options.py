"""Options of the thesis workload's load and of overload handling, shared by ``greenswarm bench
generate`` and ``greenswarm bench simulate``: the peak and the day curve (DESIGN 7.1), the
share of checkpointable jobs (3.14), and admission control (3.13)."""

from __future__ import annotations

import argparse

from cli.argtypes import positive_float
from domain.errors import ValidationError
from domain.model import HostSpec
from scheduler.admission import AdmissionMode
from workloads.thesis import ThesisWorkloadConfig

DEFAULT_PEAK = 1.5
DEFAULT_CHECKPOINT_INTERVAL_S = 300.0


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return value


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """``--peak``, ``--diurnal``, ``--checkpoint-share``, ``--checkpoint-interval-s``."""
    group = parser.add_argument_group(
        "thesis workload load", "the level at which arrivals pause, and checkpointable jobs")
    group.add_argument("--peak", type=positive_float, default=DEFAULT_PEAK, metavar="F",
                       help="arrivals pause when the CPU or memory requested since the last "
                       "pause reaches F x the cluster's capacity (default: 1.5, the thesis's "
                       "150 %%: overload; 0.75 is moderate contention)")
    group.add_argument("--diurnal", action="store_true",
                       help="the level follows a day: F x (0.2 + 0.8 x (1 - cos(2 pi t / "
                       "24 h)) / 2), lowest at midnight (t = 0), for runs of hours and days")
    group.add_argument("--checkpoint-share", type=_share, default=0.0, metavar="F",
                       help="this share of the jobs are checkpointable (DESIGN 3.14): a kill "
                       "loses only their run since their last checkpoint (default: 0)")
    group.add_argument("--checkpoint-interval-s", type=positive_float,
                       default=DEFAULT_CHECKPOINT_INTERVAL_S, metavar="S",
                       help="how often a checkpointable job saves its progress (default: "
                       f"{DEFAULT_CHECKPOINT_INTERVAL_S:g})")


def load_is_default(args: argparse.Namespace) -> bool:
    return (args.peak == DEFAULT_PEAK and not args.diurnal and args.checkpoint_share == 0
            and args.checkpoint_interval_s == DEFAULT_CHECKPOINT_INTERVAL_S)


def thesis_config(
    args: argparse.Namespace, hosts: tuple[HostSpec, ...], duration_s: float,
    arrival_rate_per_s: float | None = None,
) -> ThesisWorkloadConfig:
    """The thesis workload with the load options of ``args``."""
    return ThesisWorkloadConfig(
        hosts=hosts, duration_s=duration_s, arrival_rate_per_s=arrival_rate_per_s,
        burst_limit_fraction=args.peak, diurnal=args.diurnal,
        checkpoint_share=args.checkpoint_share,
        checkpoint_interval_s=args.checkpoint_interval_s,
    )


def refuse_load_arguments(args: argparse.Namespace, why: str) -> None:
    """The load options shape the thesis workload only: elsewhere, a clear error."""
    if not load_is_default(args):
        raise ValidationError("peak", f"--peak, --diurnal and --checkpoint-* shape the thesis "
                              f"workload only ({why})")


def add_admission_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--admission", type=AdmissionMode, choices=list(AdmissionMode),
        default=AdmissionMode.SLO,
        help="admission control (DESIGN 3.13) of the new requests that would wait in the "
        "queue (every request of qos, those of --queue-new otherwise): slo, a request is "
        "admitted when the SLO-weighted demand of its class and the more important ones fits "
        "the room that class may book, else refused at the door; none, every such request "
        "waits (default: slo)")
