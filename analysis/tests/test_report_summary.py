"""The report's first screen (analysis/report/summary.py, labels.py): which captures and
measurements it ranks. The captures are stand-ins holding only what the summary reads (counts
and percentiles with their intervals, in ns, chosen by hand), so every expected row follows from
them exactly."""

from types import SimpleNamespace

from latscope.analysis.report import labels, summary


def _stats(n, p50, lower=None, upper=None):
    """``n`` latencies with median ``p50`` ns, bounded by [lower, upper] (None: no bound);
    p99 is never bounded here."""
    quantile = SimpleNamespace(value_ns=p50, lower_ns=lower, upper_ns=upper)
    return SimpleNamespace(n=n, quantiles={50.0: quantile, 99.0: SimpleNamespace(
        value_ns=2 * p50, lower_ns=None, upper_ns=None)})


def _capture(label, stats):
    return SimpleNamespace(label=label, stats=stats, metadata={})


def _captures():
    """An idle capture without frame records (plain stages only) and two frame captures whose
    plain, by-order rx.udp pairs only 8 packets beside a bounded per-class rx.udp[hp]."""
    idle = _capture("el-dm-64", {"rx.udp": _stats(8000, 2940.0, 2930.0, 2950.0)})
    frames = [_capture(label, {"rx.udp": _stats(8, p50, 1000.0, 30000.0),
                               "rx.udp[hp]": _stats(994, p50, p50 - 500.0, p50 + 500.0)})
              for label, p50 in (("stack-bg60", 14890.0), ("other-bg60", 12410.0))]
    return [idle] + frames


def test_a_frame_capture_shows_only_its_per_class_stages_first():
    idle, stack, other = _captures()
    assert not labels.has_classes(idle) and labels.has_classes(stack)
    assert labels.on_first_screen(idle, "rx.udp")
    assert not labels.on_first_screen(stack, "rx.udp")
    assert labels.on_first_screen(stack, "rx.udp[hp]")


def test_the_at_a_glance_table_leaves_a_frame_captures_plain_rows_out():
    captures = _captures()
    labels = [a.label for a in captures]
    names = summary.headline_names(["rx.udp", "rx.udp[hp]"])
    table = summary.headline_table(captures, labels, names)
    assert [(r[0], r[1], r[2], r[3]) for r in table.rows] == [
        ("rx.udp", 1, "el-dm-64", "8,000"),
        ("rx.udp[hp]", 1, "other-bg60", "994"),
        ("rx.udp[hp]", 2, "stack-bg60", "994")]
    assert not any("[no bound]" in r[4] for r in table.rows)      # p50 bounded on every row
    # the ranking: the plain rx.udp has one capture left (no ranking), rx.udp[hp] two
    assert summary.ranking_sentences(captures, labels, names) == [
        "rx.udp[hp] at p50 (µs), fastest first: other-bg60 (12.410) < stack-bg60 (14.890)."]
    # their plain rows are not "left off for a small sample": they belong to the detail
    assert summary.unbounded_note(captures, labels, names) is None
