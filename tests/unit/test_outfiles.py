"""``--out`` targets: a regular file is replaced atomically; a device or a fifo is written in
place, never replaced; a directory, where a file is expected, is refused (DESIGN 9).

The character device is a real one: a null device made with mknod in the test's own directory
(root only; skipped otherwise), so /dev/null itself is never at risk."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.main import main
from domain.errors import ValidationError
from measure.recorder import MetricsRecorder
from measure.result_files import save_result
from sim.profiles import DEFAULT_PROFILES, write_profiles
from workloads.cluster import parse_hosts_spec
from workloads.outfiles import OutFile, out_directory, write_text
from workloads.thesis import ThesisWorkloadConfig, generate_thesis_trace
from workloads.trace_file import read_trace, write_trace


def null_device(directory: Path) -> Path:
    """A character device that discards what is written (major 1, minor 3, as /dev/null)."""
    path = directory / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a character device needs root")
    return path


def small_trace_args(out: Path) -> list[str]:
    return ["bench", "generate", "--seed", "3", "--duration-s", "5", "--out", str(out)]


def test_a_fifo_given_as_out_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    # Open the reading end first (non-blocking), so the command's writer does not wait; the
    # trace of five seconds fits in the pipe's buffer.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert main(small_trace_args(fifo)) == 0
        chunks = []
        while chunk := os.read(reader, 65536):
            chunks.append(chunk)
    except BlockingIOError:  # nothing (more) to read
        pass
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the fifo was replaced by a file"
    lines = b"".join(chunks).decode().splitlines()
    assert lines and json.loads(lines[0])["kind"] == "header"
    assert not list(tmp_path.glob("*.tmp"))


def _trace(path: Path) -> None:
    write_trace(path, generate_thesis_trace(1, ThesisWorkloadConfig(duration_s=5.0)))


def _profiles(path: Path) -> None:
    write_profiles(path, DEFAULT_PROFILES)


def _text(path: Path) -> None:
    write_text(path, "summary\n")


WRITERS: dict[str, Callable[[Path], None]] = {
    "trace": _trace, "profiles": _profiles, "text": _text,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_character_device_is_never_replaced(tmp_path: Path, writer: str) -> None:
    device = null_device(tmp_path)
    WRITERS[writer](device)
    assert stat.S_ISCHR(os.stat(device).st_mode), f"the {writer} writer replaced the device"
    assert os.stat(device).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temporary file left


def test_the_result_files_of_a_run_are_never_replaced_when_devices(tmp_path: Path) -> None:
    policy_dir = tmp_path / "spread"
    policy_dir.mkdir()
    for name in ("result.json", "host_series.csv"):
        os.rename(null_device(tmp_path), policy_dir / name)
    hosts = parse_hosts_spec("1x1c1g")
    save_result(MetricsRecorder("spread", hosts).finish(1.0), tmp_path)
    for name in ("result.json", "host_series.csv"):
        assert stat.S_ISCHR(os.stat(policy_dir / name).st_mode), f"{name} was replaced"


def test_convert_and_generate_write_into_a_character_device(tmp_path: Path) -> None:
    device = null_device(tmp_path)
    assert main(small_trace_args(device)) == 0
    assert stat.S_ISCHR(os.stat(device).st_mode)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_regular_file_is_replaced_whole_and_a_symlink_kept(tmp_path: Path, writer: str) -> None:
    target = tmp_path / "out.file"
    target.write_text("old content that is longer than nothing\n" * 100)
    link = tmp_path / "link"
    link.symlink_to(target)
    WRITERS[writer](link)
    assert link.is_symlink() and stat.S_ISREG(os.lstat(target).st_mode)
    assert "old content" not in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "out.file"]
    if writer == "trace":
        assert read_trace(target).header.source == "thesis"


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("before")
    out = OutFile(target)
    out.write_path.write_text("half")
    out.discard()
    assert target.read_text() == "before" and not out.write_path.exists()


def test_a_directory_where_a_file_is_expected_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    assert main(small_trace_args(directory)) == 2
    err = capsys.readouterr().err
    assert "out: " in err and "is a directory" in err
    with pytest.raises(ValidationError, match="is a directory"):
        write_text(directory, "x")
    assert directory.is_dir() and not list(directory.iterdir())


def test_an_out_directory_must_be_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = main(["bench", "simulate", "--workload", "thesis", "--seed", "1", "--duration-s",
                 "60", "--policies", "spread", "--no-plots", "--out", str(fifo)])
    assert code == 2
    err = capsys.readouterr().err
    assert "out: " in err and "is a fifo, not a directory" in err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    created = out_directory(tmp_path / "a" / "b")
    assert created.is_dir()
    assert out_directory(tmp_path / "c", create=False) == tmp_path / "c"
    assert not (tmp_path / "c").exists()
