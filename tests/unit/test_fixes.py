"""analyse/fixes.py: every cause says which fixes it gets, and docs/verdicts.md's cause table
is rendered from that table (it cannot drift by hand)."""

from __future__ import annotations

from diskinfo.analyse import fixes
from diskinfo.analyse.fix_ids import FixId
from diskinfo.analyse.fixes import fix_ids_table
from diskinfo.record import Cause, IntervalRecord, Verdict
from tests.helpers import ROOT
from tests.helpers.docs import generated


def test_every_cause_has_its_fixes():
    assert set(fixes.FIXES) == set(Cause)


def test_docs_cause_table_is_the_codes():
    assert generated("verdicts.md", "cause table") == fixes.markdown_table(), (
        "docs/verdicts.md is out of date: replace its cause table with the output of "
        "`python -m diskinfo.analyse.fixes`"
    )


def test_every_fix_has_its_own_id_and_the_docs_list_them():
    given = [f.id for f in vars(fixes).values() if isinstance(f, fixes.Fix)]
    assert len(given) == len(set(given))
    assert generated("metrics.md", "fix ids") == fix_ids_table(), (
        "docs/metrics.md is out of date: replace its fix ids with the output of "
        "`python -m diskinfo.analyse.fixes ids`"
    )


def test_the_wecom_template_says_each_fix_id_in_the_docs_words():
    text = (ROOT / "monitoring/alertmanager/wecom.tmpl").read_text()
    begin, end = "{{/* fix words: begin */}}\n", "{{/* fix words: end */}}"
    assert text.split(begin, 1)[1].split(end, 1)[0] == fixes.wecom_fix_words(), (
        "monitoring/alertmanager/wecom.tmpl is out of date: replace its fix words with the "
        "output of `python -m diskinfo.analyse.fixes wecom`"
    )


def test_the_tally_counts_a_fix_by_its_id_whatever_its_words():
    """The figures in a fix's words change from interval to interval: one fix all the same,
    named by its latest words; a record from before ids counts by its words."""
    from diskinfo.analyse.tally import VerdictTally

    tally = VerdictTally()
    for words, seconds in [("num_workers 0 -> 2: 1.0 of 4 cores", 10), ("preload it", 15)]:
        fid = FixId.WORKERS if words.startswith("num_workers") else FixId.PRELOAD
        v = Verdict("input-bound: cpu", fixes=[words], fix_ids=[fid])
        tally.add(IntervalRecord(ts=0.0, elapsed_s=seconds), v)
    v = Verdict(
        "input-bound: cpu", fixes=["num_workers 0 -> 2: 1.5 of 4 cores"], fix_ids=["more-workers"]
    )
    tally.add(IntervalRecord(ts=0.0, elapsed_s=10), v)
    assert tally.top_fix() == ("input-bound: cpu", "num_workers 0 -> 2: 1.5 of 4 cores")
