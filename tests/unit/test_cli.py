"""Bad arguments: one line on stderr naming the problem, exit 2, never a usage dump."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from diskinfo.cli import build_parser, main
from tests.helpers import ROOT
from tests.helpers.records import record, write_run


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["watch", "/tmp", "--interval", "0"], "must be greater than 0"),
        (["watch", "/tmp", "--interval", "abc"], "not a number"),
        (["watch", "/tmp", "--interval", "inf"], "must be a finite number, got inf"),
        (["bench", "/tmp", "--seconds", "inf"], "must be a finite number, got inf"),
        ([], "required: COMMAND"),
        (["frob"], "invalid choice: 'frob'"),
        (["pack"], "required: SRC, DEST"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(capsys, argv, expected):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "--help" in err, err


def test_interval_longer_than_a_day_is_one_line_exit_2(capsys):
    # a wait beyond what the clock takes ended in an OverflowError traceback
    assert main(["watch", "/tmp", "--interval", "1e10", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert err == "diskinfo: error: --interval must be at most 86400 s (a day), got 1e+10\n"


@pytest.mark.parametrize("verb", ["resolve", "watch", "bench"])
def test_missing_path_is_the_same_one_line_exit_2(capsys, verb):
    assert main([verb, "/no/such/path"]) == 2
    err = capsys.readouterr().err
    assert err == "diskinfo: error: no such file or directory: /no/such/path\n"


@pytest.mark.parametrize(
    ("argv", "help_of"),
    [
        (["tune", "train:make", "/data"], "diskinfo tune"),  # a second positional
        (["watch", "/tmp", "--bogus"], "diskinfo watch"),
        (["--bogus", "watch", "/tmp"], "diskinfo"),  # before the verb: the top level's
    ],
)
def test_a_word_left_over_points_to_the_help_of_where_it_was_given(capsys, argv, help_of):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{help_of}: error: unrecognized arguments: "), err
    assert err.endswith(f"(see '{help_of} --help')\n") and err.count("\n") == 1, err


def test_every_verb_says_what_it_does_in_its_own_help():
    """`diskinfo VERB --help` opens with the line `diskinfo --help` lists the verb by, and every
    positional argument says what it takes."""
    parser = build_parser()
    top = parser.format_help()
    listed = dict(line.split(maxsplit=1) for line in top.splitlines() if line.startswith("    "))
    assert set(listed) == {"resolve", "watch", "bench", "report", "status", "pack", "tune", "run"}
    assert set(listed) == set(parser.verbs)
    for name, summary in listed.items():
        out = parser.verbs[name].format_help()
        assert out.split("\n\n")[1] == summary, (name, out)
        if "positional arguments:" in out:
            block = out.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
            assert all(len(line.split()) > 1 for line in block.splitlines() if line[2] != " "), (
                name,
                block,
            )


def test_every_option_the_docs_show_is_an_option_of_that_verb():
    """A user copies `diskinfo VERB --option` from the README or docs/: the verb must take it."""
    takes = {
        name: set(re.findall(r"--[a-z][a-z-]+", verb.format_help()))
        for name, verb in build_parser().verbs.items()
    }
    shown = 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in re.finditer(rf"diskinfo ({'|'.join(takes)})\b([^`\n|]*)", doc.read_text()):
            # after a lone `--` the words are the command's (`diskinfo run -- torchrun ...`)
            words = m.group(2).split(" -- ")[0]
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", words):
                shown += 1
                assert option in takes[m.group(1)], f"{doc.name}: {m.group(0)}"
    assert shown > 20  # the docs do show options: the pattern still finds them


def test_a_reader_that_went_away_ends_it_quietly(tmp_path: Path) -> None:
    """`diskinfo report run.jsonl | head -1`: the rest of the output has nowhere to go. It
    ended in 'diskinfo: error: Broken pipe'; coreutils end silently with SIGPIPE's status."""
    run = write_run(tmp_path / "run.jsonl", [record(ts=1_800_000_000.0 + i) for i in range(3)])
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        p = subprocess.run(
            [sys.executable, "-m", "diskinfo.cli", "report", str(run), "--no-png"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (p.returncode, p.stderr) == (141, "")
