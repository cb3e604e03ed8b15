"""The DUT's time-statistics console line: the parser against the firmware's own formatter.

The C formatter's unit test (``zephyr-app/lib/latscope_core/tests/test_time_stats.c``) states
the exact lines it writes; this test parses those same lines, so the C writer and the Python
reader cannot drift apart."""
import re
from pathlib import Path

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.files.dut_console import parse_time_stats, time_stats_metadata

C_TEST = Path(__file__).parents[2] / "zephyr-app/lib/latscope_core/tests/test_time_stats.c"


def c_lines():
    """The expected lines of the C test, joined from its adjacent string literals."""
    text = C_TEST.read_text()
    out = []
    for m in re.finditer(r'CHECK_STR\(buf, ((?:"[^"]*"\s*)+)\)', text):
        line = "".join(re.findall(r'"([^"]*)"', m[1])).replace("\\n", "\n")
        if line.startswith("latscope-netstats:"):
            out.append(line)
    return out


def test_parses_the_lines_the_firmware_formatter_writes():
    lines = c_lines()
    assert len(lines) == 3
    b = parse_time_stats("".join(lines))
    # The numbers are those the C test feeds its formatter (test_time_stats.c).
    assert b.rx_n.tolist() == [30, 0, 1] and b.rx_us.tolist() == [1234, 0, 7]
    assert b.tx_n.tolist() == [31, 2, 0] and b.tx_us.tolist() == [900, 50, 0]
    assert b.t_cycles.tolist() == [123456789012, 1, 3] and b.hz.tolist() == [333333343, 2, 2]
    # t in cycles at hz: 123456789012 cycles at 333333343 Hz; 1 and 3 cycles at 2 Hz.
    assert b.t_ns.tolist() == [123456789012 * 10**9 // 333333343, 500_000_000, 1_500_000_000]


def test_lines_among_other_console_output_and_metadata_form():
    text = ("*** Booting Zephyr\nlatscope-edge: 0 m1 rise t=5\n"
            "[00:00:01.000] latscope-netstats: t=100 hz=100 rx_n=2 rx_us=30 tx_n=1 tx_us=4\n")
    b = parse_time_stats(text)
    assert len(b) == 1 and b.t_ns.tolist() == [1_000_000_000]
    meta = time_stats_metadata(b.select(np.array([True])), "console.log")
    assert time_stats_metadata(b, "x", t_ns=[7])["batches"][0]["t_ns"] == 7
    assert meta == {"format": "latscope-netstats", "source": "console.log",
                    "batches": [{"t_ns": 1_000_000_000, "rx_n": 2, "rx_us": 30, "tx_n": 1,
                                 "tx_us": 4}]}
    assert len(parse_time_stats("no lines here")) == 0


def test_damaged_line_is_an_error_users_can_act_on():
    with pytest.raises(LatscopeError, match=r"time statistics line 2 must be"):
        parse_time_stats("ok\nlatscope-netstats: t=1 hz=1 rx_n=2\n")
    with pytest.raises(LatscopeError, match="hz must be positive, not 0"):
        parse_time_stats("latscope-netstats: t=1 hz=0 rx_n=0 rx_us=0 tx_n=0 tx_us=0")
