"""One size rule for every option that takes a size (bench --size, pack --shard-size, ...)."""

from __future__ import annotations

import argparse

import pytest

from diskinfo import cli
from diskinfo.errors import UserError
from diskinfo.units import counted, format_given, format_size, parse_size, size_arg
from tests.helpers.cli import one_line_error


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512M", 512 * 2**20),
        ("512m", 512 * 2**20),
        ("512MiB", 512 * 2**20),
        ("512 MB", 512 * 10**6),
        ("64MB", 64_000_000),
        ("1G", 2**30),
        ("1GiB", 2**30),
        ("1GB", 10**9),
        ("1.5 gb", 1_500_000_000),
        ("4k", 4096),
        ("4kB", 4000),
        ("2T", 2**41),
        ("4096", 4096),
        ("4096B", 4096),
    ],
)
def test_one_rule(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "MB", "12XB", "-1GB", "0", "abc", "1 2M", "5M5"])
def test_not_a_size(text: str) -> None:
    with pytest.raises(UserError, match=r"not a size|at least"):
        parse_size(text)


def test_minimum() -> None:
    assert parse_size("1M", minimum=2**20) == 2**20
    with pytest.raises(UserError, match="at least 1 MiB"):
        parse_size("1k", minimum=2**20)
    with pytest.raises(argparse.ArgumentTypeError, match="at least"):
        size_arg(2**20)("1k")


def test_format_says_which_unit() -> None:
    assert format_size(1_234_567) == "1.23 MB"
    assert format_size(1_234_567, binary=True) == "1.18 MiB"
    assert format_size(512) == "512 B"
    assert format_size(3.6 * 2**40, binary=True) == "3.6 TiB"


def test_bench_and_pack_read_sizes_alike(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    bench = parser.parse_args(["bench", "/tmp", "--size", "512M"])
    assert bench.size == 512 * 2**20
    pack = parser.parse_args(["pack", "/src", "/dest", "--shard-size", "512M"])
    assert pack.shard_size == 512 * 2**20
    # the same rule, the same one-line refusal, naming the option, before SRC is looked at
    err = one_line_error(["pack", "/nonexistent-src", "/tmp/x", "--shard-size", "12XB"], capsys)
    assert err.startswith("diskinfo pack: error: argument --shard-size: not a size"), err
    err = one_line_error(["pack", "/nonexistent-src", "/tmp/x", "--shard-size", "0"], capsys)
    assert "argument --shard-size: size must be at least 1 B, got 0" in err, err


def test_help_states_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    for verb in ("bench", "pack"):
        with pytest.raises(SystemExit):
            cli.main([verb, "--help"])
        assert "1GB = 10^9 bytes" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def test_counted_says_one_thing_in_the_singular() -> None:
    assert [counted(n, "shard") for n in (0, 1, 2)] == ["0 shards", "1 shard", "2 shards"]
    assert [counted(n, "class", "classes") for n in (1, 2)] == ["1 class", "2 classes"]


@pytest.mark.parametrize(
    ("given", "shown"),
    [("100k", "100 KiB"), ("512M", "512 MiB"), ("1.5G", "1.5 GiB"), ("4GB", "4 GB"),
     ("100kB", "100 kB"), ("1000", "1 kB"), ("1024", "1 KiB")],
)  # fmt: skip
def test_a_size_reads_back_as_given(given: str, shown: str) -> None:
    assert format_given(parse_size(given)) == shown
