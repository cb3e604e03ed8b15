"""The report: HTML structure (real tables with units, the SIMULATED banner, figures with alt text,
nothing fetched from elsewhere), grouped comparisons, the paper's Table I beside ours, and the
figure rules (distinct styles, empty bins not drawn). Parsed with the standard library's HTML
parser, not with the code that wrote it."""

import html.parser
import os

import numpy as np
import pytest

from latscope.analysis import api, grouping, report
from latscope.analysis.report import figures, labels, summary

ROOT = api.repository_root()
BENCH = os.path.join(ROOT, "fixtures", "bench") if ROOT else None
needs_fixtures = pytest.mark.skipif(not BENCH or not os.path.exists(
    os.path.join(BENCH, "gem-64.lsc")), reason="fixtures/bench is not present")


class _Page(html.parser.HTMLParser):
    """Collects tables (caption, header cells, rows), images, banner text and headings."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.banner, self.h2 = [], [], "", []
        self._stack, self._text = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("meta", "br", "hr", "link"):          # void elements: nothing to close
            return
        self._stack.append((tag, attrs))
        self._text = []
        if tag == "table":
            self.tables.append({"caption": "", "headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag == "img":
            self.images.append(attrs)
            self._stack.pop()

    def handle_endtag(self, tag):
        text = "".join(self._text).strip()
        opened, attrs = self._stack.pop() if self._stack else (None, {})
        assert opened == tag, f"</{tag}> closes <{opened}>"
        if tag == "caption":
            self.tables[-1]["caption"] = text
        elif tag == "th":
            self.tables[-1]["headers"].append(text)
        elif tag == "td":
            self.tables[-1]["rows"][-1].append(text)
        elif tag == "div" and attrs.get("class") == "banner":
            self.banner = text
        elif tag == "h2":
            self.h2.append(text)

    def handle_data(self, data):
        self._text.append(data)


def _page(path):
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    for t in page.tables:                 # the header row holds <th> cells only
        t["rows"] = [r for r in t["rows"] if r]
    return page


@pytest.fixture(scope="module")
def bench_report(tmp_path_factory):
    if not BENCH or not os.path.exists(os.path.join(BENCH, "gem-64.lsc")):
        pytest.skip("fixtures/bench is not present")
    names = ["gem-64", "gem-1024", "el-dm-64", "fast-track-64"]
    analyses = [api.analyze_file(os.path.join(BENCH, f"{n}.lsc"), packets=True) for n in names]
    out = tmp_path_factory.mktemp("report")
    written = report.write_report(analyses, str(out), workers=2,
                                  warnings={"el-dm-64": ["a test warning for this input"]},
                                  forensics={a.label: [api.explain(a, "rx.isr", top=3)]
                                             for a in analyses},
                                  command="latscope report (test)")
    return analyses, out, written


@needs_fixtures
def test_report_html_structure(bench_report):
    analyses, out, written = bench_report
    page = _page(out / "report.html")
    # the fixtures come from the simulated bench (instrument.simulated): a banner says so
    assert page.banner.startswith("SIMULATED: 4 of 4 captures")
    assert all(grouping.is_simulated(a.metadata) for a in analyses)
    # real tables, each with a caption naming its time unit (or being the inputs table)
    assert len(page.tables) >= 10
    for t in page.tables:
        assert t["headers"] and t["rows"] and all(len(r) == len(t["headers"]) for r in
                                                   t["rows"] if r), t["caption"]
        assert any(u in t["caption"] for u in ("(ns", "(µs", "(ms", "µs;", "ns;", " ns)",
                                               " µs)")) or \
            t["caption"] in ("inputs", "provenance of each input") or \
            t["caption"].startswith("latency = fixed"), t["caption"]
    captions = [t["caption"] for t in page.tables]
    # comparisons grouped as the data is organised, not all against the first file
    assert any(c.startswith("MACs at 64 B frames: differences against gem-64") for c in captions)
    assert any(c.startswith("frame sizes within gem: differences against gem-64")
               for c in captions)
    assert any(c.startswith("fast track against the stack at 64 B frames: differences against "
                            "el-dm-64") for c in captions)
    fast = next(t for t in page.tables if t["caption"].startswith("fast track"))
    assert fast["rows"][0][1] == "rx.fast vs rx.udp"
    # the paper's Table I beside ours: GEM Rx UDP 64 B is 7.48 ± 0.35 µs (paper, seed 002)
    paper = next(t for t in page.tables if t["caption"].startswith("the paper's Table I"))
    row = next(r for r in paper["rows"] if r[:2] == ["gem-64", "rx.udp"])
    assert row[2] == "7.48 ± 0.35"
    mean_us = analyses[0].stats["rx.udp"].mean_ns / 1e3
    assert row[3].startswith(f"{mean_us:.2f} ± ")
    # figures: embedded PNGs with alt text saying what they show, and SIMULATED
    assert len(page.images) >= 4 * 5
    for img in page.images:
        assert img["src"].startswith("data:image/png;base64,")
        assert len(img.get("alt", "")) > 20 and "SIMULATED" in img["alt"]
    assert any("percentile" in img["alt"] and "1/(1-p)" in img["alt"] for img in page.images)
    text = (out / "report.html").read_text()
    assert "src=\"http" not in text and "<link" not in text and "<script" not in text
    # the warning given for one input is listed and repeated next to what it feeds
    assert "a test warning for this input" in text
    assert "Made from capture(s) with warnings: el-dm-64" in text
    md = (out / "report.md").read_text()
    assert "**SIMULATED: 4 of 4 captures" in md and "| configuration" in md
    for path in written[2:]:
        assert path.endswith(".png") and os.path.getsize(path) > 1000
        assert f"]({os.path.basename(path)})" in md


def test_no_banner_for_measured_captures(tmp_path):
    """Captures without simulated metadata: no banner, no SIMULATED in any alt text."""
    from latscope.analysis.synth import synthetic_chunks
    t, c, r = next(iter(synthetic_chunks(40_000, chunk_events=1 << 20, seed=3)))
    a = api.from_events(t, c, r, tick_hz=320_000_000, label="bench-a",
                        markers={"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"},
                        metadata={"instrument": {"board": "ecpix5"}})
    written = report.write_report([a], str(tmp_path), workers=1)
    page = _page(written[0])
    assert page.banner == "" and page.images
    assert not any("SIMULATED" in img["alt"] for img in page.images)
    assert "SIMULATED" not in (tmp_path / "report.md").read_text()


def test_display_labels_tell_same_labelled_inputs_apart():
    from types import SimpleNamespace as A
    caps = [A(label="gem-64", path="/x/run1/gem-64.lsc"), A(label="gem-64",
            path="/x/run2/gem-64.lsc"), A(label="el-dm-64", path="/x/run1/el-dm-64.lsc")]
    assert grouping.display_labels(caps) == ["gem-64 [run1/gem-64.lsc]",
                                             "gem-64 [run2/gem-64.lsc]", "el-dm-64"]


def test_groups_follow_the_organisation_of_the_data():
    from types import SimpleNamespace as A
    labels = ["gem-64", "el-so-64", "el-dm-64", "gem-256", "el-dm-256", "fast-track-256"]
    caps = [A(label=x, size=int(x.rsplit("-", 1)[1]), path=None, metadata={}) for x in labels]
    groups = [(g.kind, g.title, [labels[i] for i in g.members])
              for g in grouping.comparison_groups(caps)]
    assert groups == [
        ("mac", "MACs at 64 B frames", ["gem-64", "el-so-64", "el-dm-64"]),
        ("mac", "MACs at 256 B frames", ["gem-256", "el-dm-256"]),
        ("size", "frame sizes within gem", ["gem-64", "gem-256"]),
        ("size", "frame sizes within el-dm", ["el-dm-64", "el-dm-256"]),
        ("fast", "fast track against the stack at 256 B frames", ["el-dm-256",
                                                                  "fast-track-256"]),
    ]
    lone = [A(label="a", size=None, path=None, metadata={}),
            A(label="b", size=None, path=None, metadata={})]
    assert [g.kind for g in grouping.comparison_groups(lone)] == ["first"]


def test_series_styles_differ_in_colour_and_line_style():
    styles = [figures.series_style(i) for i in range(40)]
    for a, b in zip(styles, styles[1:], strict=False):      # neighbours differ in both
        assert a[0] != b[0] and a[1] != b[1]
    assert len(set(styles)) == 40


def test_empty_histogram_bins_are_not_drawn():
    """The outline breaks (NaN) over empty bins instead of dropping to a floor value."""
    low = np.array([1.0, 2.0, 8.0])
    high = np.array([2.0, 3.0, 9.0])
    x, y = figures.step_path(low, high, np.array([5, 7, 1]))
    assert np.isnan(x[4]) and np.isnan(y[4])               # gap between 3 and 8
    assert list(x[:4]) == [1, 2, 2, 3] and list(y[:4]) == [5, 5, 7, 7]
    assert list(x[5:]) == [8, 9] and list(y[5:]) == [1, 1]
    assert np.nanmin(y) == 1                               # no zero or floor drawn


def test_units_are_chosen_per_table():
    from types import SimpleNamespace as S

    from latscope.analysis.stats import Quantile
    q = {p: Quantile(p, 500.0, 400.0, 600.0, 0.95) for p in (50.0, 99.0, 99.9)}
    s = S(n=10, mean_ns=500.0, three_sigma_ns=30.0, min_ns=400.0, max_ns=700.0, pdv_ns=10.0,
          quantiles=q, counts={})
    assert "mean ns" in report.stats_table({"rx.isr": s})
    s.mean_ns = 5000.0
    assert "mean µs" in report.stats_table({"rx.isr": s})


def test_parallel_figures_from_a_script_without_main_guard(tmp_path):
    """A script fed on stdin (no __main__ guard, no file) writes a report with two drawing
    workers: the workers never re-run the caller's script."""
    import subprocess
    import sys
    script = f"""
from latscope.analysis import api, report
from latscope.analysis.synth import synthetic_chunks
t, c, r = next(iter(synthetic_chunks(20_000, chunk_events=1 << 20, seed=4)))
a = api.from_events(t, c, r, tick_hz=320_000_000, label="x",
                    markers={{"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}})
print(len(report.write_report([a], {str(tmp_path)!r}, workers=2)))
"""
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert int(out.stdout.split()[-1]) == 2 + len(pngs) and len(pngs) >= 4


@needs_fixtures
def test_report_answers_first_and_explains_itself(bench_report):
    """The page's structure (issue 23): the answer first (sentences, the headline table, one
    figure), then the contents linking every section; a glossary entry for every measurement
    shown; the error budget; the provenance (version, seeds, files); alt text on every figure;
    every table downloadable as CSV."""
    import base64
    import re

    import latscope
    from latscope.analysis.stats import n_required
    analyses, out, _ = bench_report
    text = (out / "report.html").read_text()
    page = _page(out / "report.html")
    assert page.h2[0] == "What was measured and what it found"
    first = text[:text.index("<nav class='toc'")]
    # the verdict in a sentence, with its interval: el-dm-64 against gem-64 (MACs at 64 B)
    assert re.search(r"el-dm-64 delivers to the app \d+\.\d+ µs \[\d+\.\d+, \d+\.\d+\] sooner "
                     r"than gem-64 at p50 \(SIMULATED\)\.", first)
    assert "fastest first" in first and "SIMULATED" in first
    assert "at a glance: p50 and p99 per capture" in first
    assert first.count("<img ") == 1
    # contents: one link per section after the answer, each to an existing heading
    nav = text[text.index("<nav class='toc'"):text.index("</nav>")]
    links = re.findall(r"href='#([^']+)'", nav)
    ids = re.findall(r"<h2 id='([^']+)'", text)
    assert links == ids[1:] and len(links) == len(page.h2) - 1
    # glossary: every measurement named in any table's measurement column or caption
    terms = re.findall(r"<dt id='term-[^']*'>([^<]+)</dt>", text)
    shown = {r[0] for t in page.tables if t["headers"][:1] == ["measurement"] for r in t["rows"]}
    shown |= {n for a in analyses for n in a.stats if a.stats[n].n}
    assert shown and shown <= set(terms), shown - set(terms)
    gloss = text[text.index("id='glossary'"):]
    assert "rx_dv falling → m_udp rising" in gloss       # the definition as written
    assert f"≥ {n_required(0.999):,}" in gloss           # p99.9's packets, from the code
    for term in ("timestamp tick", "channel skew after calibration", "MII/RMII clock grid",
                 "marker pulse cost"):
        assert term in terms
    # provenance: version, and per input its file and seed from the capture metadata
    prov = next(t for t in page.tables if t["caption"] == "provenance of each input")
    assert f"latscope</dt><dd>{latscope.__version__}" in text
    seeds = {r[0]: r[prov["headers"].index("seed")] for r in prov["rows"]}
    for a in analyses:
        assert seeds[a.label] == str(a.metadata["simbench"]["seed"])
    # tail forensics: per capture its 3 slowest rx.isr packets, the first being the maximum
    slow = [t for t in page.tables if "rx.isr: the 3 slowest of" in t["caption"]]
    assert len(slow) == len(analyses)
    for a in analyses:
        t = next(t for t in slow if t["caption"].startswith(f"{a.label} rx.isr"))
        assert [r[0] for r in t["rows"][:3]] == ["1", "2", "3"]
        assert float(t["rows"][0][3]) == pytest.approx(a.stats["rx.isr"].max_ns / 1000,
                                                       abs=5e-4)      # printed to 3 decimals
    assert "Why the slowest packets were slow" in page.h2
    assert "command</dt><dd>latscope report (test)" in text
    # figures: alt text; tables: a CSV link each whose first line is the header row
    assert all(len(img.get("alt", "")) > 20 for img in page.images)
    csvs = re.findall(r"href='data:text/csv;charset=utf-8;base64,([^']+)'", text)
    assert len(csvs) == len(page.tables)
    assert base64.b64decode(csvs[0]).decode().splitlines()[0].startswith("measurement,rank")


@needs_fixtures
def test_histogram_range_is_not_set_by_outliers(bench_report):
    """Every histogram's x range (the one the drawer sets, :func:`figures.histogram_range`) is
    set by at least 0.1 % of some series' packets at each end, so a lone outlier (el-dm-64's
    rx.isr has one) never decides it."""
    analyses, _, _ = bench_report
    labels = grouping.display_labels(analyses)
    names = report.common_names(analyses)
    jobs = figures.figure_jobs(analyses, labels, names, [grouping.family(a) for a in analyses],
                               [True] * len(analyses))
    hists = [j for j in jobs if j[1] == "histogram"]
    assert hists
    for _stem, _kind, data, _alt in hists:
        lo, hi = figures.histogram_range(data["series"])
        # fraction of each series at or beyond the edges (bucket upper/lower bounds)
        top = max(s["count"][s["high_ns"] >= hi].sum() / s["count"].sum()
                  for s in data["series"])
        bottom = max(s["count"][s["low_ns"] <= lo].sum() / s["count"].sum()
                     for s in data["series"])
        assert top >= 0.001 and bottom >= 0.001, data["name"]


@pytest.fixture(scope="module")
def under_load_report(tmp_path_factory):
    """The demo's organisation: idle el-dm-64 and fast-track-64 (fixtures/bench) beside the
    under-load pair (capture/sim/demo_load.py, 500 requests each beside 60 % background load)."""
    if not BENCH or not os.path.exists(os.path.join(BENCH, "el-dm-64.lsc")):
        pytest.skip("fixtures/bench is not present")
    demo_load = pytest.importorskip("latscope.capture.sim.demo_load")
    out = tmp_path_factory.mktemp("under-load")
    rows = demo_load.run_under_load(str(out / "captures"), packets=500, jobs=1)
    paths = [os.path.join(BENCH, f"{n}.lsc") for n in ("el-dm-64", "fast-track-64")]
    analyses = [api.analyze_file(p, packets=True) for p in paths + [r["path"] for r in rows]]
    report.write_report(analyses, str(out / "report"), workers=2,
                        forensics=api.explain_headlines(analyses[2:], top=3))
    return analyses, out / "report"


@pytest.mark.slow
def test_the_under_load_verdicts_lead_the_first_screen(under_load_report):
    """Issue 23: the demo's headline (the fast track against the stack under load, class hp) is
    stated on the first screen as verdict sentences with intervals, marked SIMULATED; loaded
    captures are compared and ranked only with each other and kept out of the paper's Table I
    (the paper measured no load); the forensics name the other frames by class and size."""
    import re
    _analyses, out = under_load_report
    text = (out / "report.html").read_text()
    page = _page(out / "report.html")
    first = text[:text.index("<nav class='toc'")]
    assert "The fast track against the stack under 60 % background load (IMIX)" in first
    # 500 packets bound the difference at p50 and p99 (each side's interval is at sqrt(0.95):
    # p99's needs >= 435 packets, stats.n_required); with the requests in queued bursts the
    # p50 difference's interval may still span 0, and the sentence must then say so
    for p in ("p50", "p99"):
        lead = re.search(r"fast-track-64-bg60-burst delivers to the app \d+\.\d+ µs "
                         r"\[\d+\.\d+, \d+\.\d+\] sooner than el-dm-64-bg60-burst at "
                         rf"{p} under 60 % background load \(IMIX\) \(SIMULATED\)\.", first)
        undecided = re.search(rf"\[hp\]\) at {p} under 60 % background load \(IMIX\): no "
                              r"difference between fast-track-64-bg60-burst and "
                              r"el-dm-64-bg60-burst can be told \(-?\d+\.\d+ µs "
                              r"\[-?\d+\.\d+, -?\d+\.\d+\]\)", first)
        assert lead or undecided, p
    # the idle pair keeps its own verdict, and the rankings never mix load conditions
    assert re.search(r"fast-track-64 delivers to the app \d+\.\d+ µs \[\d+\.\d+, \d+\.\d+\] "
                     r"sooner than el-dm-64 at p50 \(SIMULATED\)\.", first)
    idle = re.search(r"tx\.wire at p50 \(µs\), fastest first: ([^<]+)<", first).group(1)
    assert "bg60" not in idle
    # the loaded captures are frame captures: the first screen shows their per-class stages
    # only, their plain by-order ones (rx.udp, rx.fast, tx.wire) stay in the detail
    assert not re.search(r"(rx\.udp|rx\.fast|tx\.wire)( \(vs rx\.udp\))? at p\d+ under", first)
    glance = next(t for t in page.tables if t["caption"].startswith("at a glance"))
    loaded = [r for r in glance["rows"] if "bg60" in r[2]]
    assert sorted(r[0] for r in loaded) == ["rx.fast[hp]", "rx.udp[hp]"]
    assert any(t["caption"].startswith("rx.udp:") and any("bg60" in c for r in t["rows"]
                                                          for c in r) for t in page.tables)
    captions = [t["caption"] for t in page.tables]
    assert any(c.startswith("fast track against the stack at 64 B frames under 60 % background "
                            "load (IMIX): differences against el-dm-64-bg60-burst")
               for c in captions)
    assert not any("MACs at 64 B" in c for c in captions)     # one stack per condition
    paper = next(t for t in page.tables if t["caption"].startswith("the paper's Table I"))
    assert {r[0] for r in paper["rows"]} == {"el-dm-64", "fast-track-64"}
    assert "agree by construction" in paper["caption"]
    # forensics of the loaded captures: open, the packet's own frame and the others by class
    slow = next(t for t in page.tables
                if t["caption"].startswith("el-dm-64-bg60-burst rx.udp[hp]: the 3 slowest"))
    own = slow["headers"].index("its own frame")
    others = slow["headers"].index(
        "other frames on the wire (direction, class, size or duration × count)")
    assert all(r[own] == "rx hp 68 B" for r in slow["rows"])
    assert all(re.fullmatch(r"none|(rx|tx) [^;]+×\d+.*", r[others]) for r in slow["rows"])
    assert any("unrecorded (other/bg)" in r[others] for t in page.tables
               if "bg60" in t["caption"] and "slowest" in t["caption"] for r in t["rows"])
    # the loaded captures' plain, by-order rx.udp (it can pair only a few packets: the
    # background frames' RX_DV falls come between) is drawn in no rx.udp figure, and each
    # figure says why; a capture too small to bound rx.udp's median is left off too, and
    # named; the others are drawn
    rx_udp = [img["alt"] for img in page.images if img["alt"].startswith("rx.udp:")]
    assert rx_udp
    for a in _analyses:
        s = a.stats.get("rx.udp")
        if s is None or not s.n:
            continue
        if labels.has_classes(a):
            assert all(re.search(r"left off, paired by order across classes \(frame captures: "
                                 r"see their per-class stages\): .*" + re.escape(a.label), alt)
                       for alt in rx_udp), a.label
            continue
        left_off = s.quantiles[50.0].upper_ns is None
        named = [f"left off, too few packets to bound the median: {a.label} (" in alt
                 for alt in rx_udp]
        assert all(named) if left_off else not any(named), (a.label, s.n)


@needs_fixtures
def test_a_windowed_single_capture_report_says_its_window(tmp_path):
    from fractions import Fraction
    a = api.analyze_file(os.path.join(BENCH, "gem-64.lsc"), packets=True,
                         start_s=Fraction(1, 100), stop_s=Fraction(1, 20))
    report.write_report([a], str(tmp_path), workers=1)
    text = (tmp_path / "report.html").read_text()
    first = text[:text.index("<nav class='toc'")]
    said = ("Window: only the events from 0.01 s to 0.05 s of each capture (--from/--to), "
            "applied before every statistic on this page.")
    assert said in first and f"window</dt><dd>{said}" in text


def test_headline_figure_set_draws_the_headline_measurements_only(tmp_path):
    """``figure_set="headline"`` (what ``latscope demo`` writes) draws the figures of the
    measurements the first screen leads with; every other measurement keeps its table and says
    how to draw its figures; an unknown set is refused."""
    from latscope import LatscopeError
    from latscope.analysis.synth import synthetic_chunks
    t, c, r = next(iter(synthetic_chunks(20_000, chunk_events=1 << 20, seed=4)))
    a = api.from_events(t, c, r, tick_hz=320_000_000, label="x",
                        markers={"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"})
    written = report.write_report([a], str(tmp_path), workers=1, figure_set="headline")
    pngs = sorted(os.path.basename(p) for p in written if p.endswith(".png"))
    lead = summary.headline_names([n for n in a.stats if a.stats[n].n])
    assert lead and "rx.isr" not in lead
    drawn = {p.rsplit("-", 1)[0] for p in pngs if p.rsplit("-", 1)[0] in a.stats}
    assert drawn == set(lead)
    # the headline measurements' p50 and p99 dots: the summary figure's, drawn once
    assert "summary.png" in pngs and not any(p.endswith("-percentiles.png") for p in pngs)
    page = _page(tmp_path / "report.html")
    assert {t["caption"].split(":")[0] for t in page.tables
            if "percentiles (" in t["caption"]} >= {"rx.isr"} | set(lead)
    assert "`latscope report` of these captures draws rx.isr's too" in (
        tmp_path / "report.md").read_text()
    with pytest.raises(LatscopeError, match="Figure set must be one of all, headline, not 'x'"):
        report.write_report([a], str(tmp_path / "bad"), figure_set="x")
