"""The marker vocabulary is one definition: the DUT firmware's point table (C, portable core)
and every Python place that names points agree. Expected values are parsed from the C sources
(zephyr-app/lib/latscope_core/{include/latscope_core/markers.h,src/markers.c}), not retyped."""
import re
import tomllib
from pathlib import Path

from latscope.analysis import definitions
from latscope.capture import runner

CORE = Path(__file__).parents[2] / "zephyr-app/lib/latscope_core"
ANALYSIS = Path(definitions.__file__).parent


def _firmware_points():
    """{value: (name, alias)} from the enum and the ls_points[] table."""
    header = (CORE / "include/latscope_core/markers.h").read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"LS_POINT_(\w+)\s*=\s*(\d+)", header)}
    table = (CORE / "src/markers.c").read_text()
    rows = re.findall(r'\[LS_POINT_(\w+)\]\s*=\s*\{\s*"([^"]+)",\s*"([^"]+)"', table)
    assert len(rows) == len(values) >= 8
    return {values[sym]: (name, alias) for sym, name, alias in rows}


def _firmware_default_map():
    table = (CORE / "src/markers.c").read_text()
    body = re.search(r"ls_marker_map_default\(.*?defaults\[LS_MARKER_CHANNELS\]\s*=\s*\{(.*?)\}",
                     table, re.S)[1]
    return re.findall(r"LS_POINT_(\w+)", body)


def test_runner_point_values_are_the_firmware_enum():
    points = _firmware_points()
    assert runner.POINTS == [points[v][0] for v in range(len(points))]


def test_analysis_aliases_are_the_firmware_aliases():
    points = _firmware_points()
    assert definitions.MARKER_ALIASES == {alias: name for name, alias in points.values()}


def test_analysis_default_map_is_the_firmware_default_map():
    header = (CORE / "include/latscope_core/markers.h").read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"LS_POINT_(\w+)\s*=\s*(\d+)", header)}
    points = _firmware_points()
    fw = {f"m{ch}": points[values[sym]][0] for ch, sym in enumerate(_firmware_default_map())}
    assert definitions.DEFAULT_MARKERS == fw


def test_default_measurements_name_only_firmware_points():
    names = {name for name, _ in _firmware_points().values()}
    aliases = {alias for _, alias in _firmware_points().values()}
    roles = set(definitions.CHANNEL_ROLES.values())
    text = tomllib.loads((ANALYSIS / "defaults.toml").read_text())
    for name, m in text["measurement"].items():
        for end in re.split(r"\s*->\s*", m["span"]):
            channel = end.split()[0]
            assert channel in names | aliases | roles, (name, channel)
    for name, s in text.get("stage", {}).items():
        for stage in re.split(r"\s*->\s*", s["span"]):
            assert stage in text["measurement"], (name, stage)


def test_analysis_reports_points_the_dut_cannot_mark_as_not_measured():
    """A capture whose metadata carries the firmware's GET_INFO ``not_measured`` list gets no
    number for those stages, even if the marker channel has edges (hand-made events: rx_dv
    falls at 1000 ns, m0 and m1 rise at 1100 and 1500 ns)."""
    import numpy as np

    from latscope.analysis.engine import Analyzer

    def run(meta):
        a = Analyzer(definitions.default_definitions(), tick_hz=1e9, metadata=meta,
                     markers={"m0": "rx.isr", "m1": "rx.copy"})
        a.feed(np.array([0, 1000, 1100, 1500], np.int64), np.array([0, 0, 3, 4], np.uint8),
               np.array([1, 0, 1, 1], np.uint8))
        return a.finish()

    measured = run({})
    assert measured.stats["rx.isr"].n == 1 and measured.stats["rx.isr"].min_ns == 100
    honest = run({"not_measured": ["rx.isr", "tx.xmit"]})
    assert "rx.isr" not in honest.stats
    assert honest.unavailable["rx.isr"] == "not measured: the DUT cannot mark rx.isr on this board"
    assert honest.stats["rx.copy"].min_ns == 500


def test_runner_passes_dut_markers_and_not_measured_into_the_capture_config():
    from latscope.capture.link.session import config_from_dict

    info = {"markers": "m1=rx.copy,m2=rx.udp,m3=rx.fast,m4=tx.send",
            "not_measured": "rx.isr,tx.xmit", "point.rx.isr": "not-measured",
            "point.rx.copy": "net_recv_data:recv-filter-entry"}
    cfg = config_from_dict(tomllib.loads(runner.dut_capture_config(info)))
    assert cfg.extra["marker_points"] == {"rx.isr": "not-measured",
                                          "rx.copy": "net_recv_data:recv-filter-entry"}
    assert cfg.markers == {"m1": "rx.copy", "m2": "rx.udp", "m3": "rx.fast", "m4": "tx.send"}
    assert cfg.extra["not_measured"] == ["rx.isr", "tx.xmit"]
    assert tomllib.loads(runner.dut_capture_config({}))["not_measured"] == []
