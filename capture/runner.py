"""An experiment (``latscope run EXPERIMENT.toml``): a matrix of paths x sizes x configurations,
one capture per cell, plus a summary. A commented example ships as ``docs/experiment.toml``.

EXPERIMENT.toml::

    name = "paper-table-1"
    target = "sim"                  # "sim" (simulated bench) or "HOST" of a real DUT
    paths = ["gem", "fast-track"]   # sim: profile families; hardware: socket | netctx | fast
    sizes = [64, 256, 1024]         # Ethernet frame bytes
    configurations = ["default"]    # labels; on hardware, the firmware's overlays must match
    packets = 500                   # per cell
    seed = 1                        # sim only
    engine = "model"                # sim only: model | verilator | amaranth | auto
    instrument = "/dev/ttyUSB1"     # hardware only: the instrument's serial port
    rate = 200                      # hardware only: packets/s paced by intended time;
                                    # omit for one packet in flight
    control_port = 4240             # hardware only
    ports = {socket = 4242, netctx = 4243, fast = 4244}   # hardware only: echo ports

    load = "bg60"                   # sim only, optional: background load beside the measured
                                    # stream (capture/sim/profiles/under-load.toml, or a share 0.6)

    [frames]                        # optional: frame classes for every capture, as in a
    classes = ["other", "hp"]       # capture config (docs/capture-format.md "Frame classes")

On hardware, every cell starts the instrument capture in a background thread, waits until it is
running, drives the DUT with :func:`latscope.capture.traffic.run_traffic` (frames of the cell's
size, sequence numbers and intended send times), writes what was sent next to the capture
(``CELL.sent.jsonl``) and waits for the capture to end (after ``packets`` packets, bounded by
a duration derived from the rate).

The summary (``summary.json`` in the output folder) lists every cell's configuration, capture
file and outcome. The DUT control protocol (``docs/zephyr-app.md``) is implemented by
:class:`ControlClient`.
"""

import json
import socket
import struct
import threading
import time
from pathlib import Path

from latscope import LatscopeError
from latscope.capture import traffic as traffic_mod
from latscope.capture.files.outputs import open_output
from latscope.capture.link import session
from latscope.capture.link.progress import CaptureProgress
from latscope.capture.link.rules import frames_toml, rules_from_dict
from latscope.capture.record import record
from latscope.capture.sim.sim_load import load_scenario
from latscope.capture.sim.sim_port import SimulatedSource
from latscope.userio import read_toml

CTRL_MAGIC = b"LC"
CTRL_VERSION = 1
OPCODES = {"get_info": 1, "set_path": 2, "set_markers": 3, "set_sizes": 4, "calibrate": 5,
           "get_counters": 6, "reset_counters": 7, "get_config": 8}
STATUS = ["ok", "bad-version", "bad-length", "unknown-opcode", "bad-value", "unsupported",
          "failed"]
PATHS = ["socket", "netctx", "fast"]
#: Marker points by protocol value (the firmware's table: zephyr-app/lib/latscope_core/src/
#: markers.c; capture/tests/test_marker_points.py ties the two).
POINTS = ["rx.isr", "rx.copy", "rx.udp", "rx.fast", "tx.send", "tx.xmit", "rx.handoff",
          "tx.queue", "tx.handoff"]
COUNTERS = ["rx_frames", "rx_fast", "rx_stack", "tx_echo", "tx_errors", "size_skipped",
            "ctrl_requests", "ctrl_errors", "marker_pulses", "fast_rejected", "fast_busy"]


def encode_request(opcode, request_id, body=b""):
    """Encode a control request (big-endian header: 'LC', version, opcode, id, length)."""
    if len(body) > 1024:
        raise LatscopeError(f"control request body of {len(body)} bytes: at most 1024")
    return CTRL_MAGIC + bytes([CTRL_VERSION, opcode]) + struct.pack(">HH", request_id,
                                                                     len(body)) + bytes(body)


def decode_response(data):
    """Decode a control response to ``(opcode, id, status, body)``."""
    if len(data) < 10 or data[:2] != CTRL_MAGIC or not data[3] & 0x80:
        raise LatscopeError("DUT control: not a latscope control response")
    if data[2] != CTRL_VERSION:
        raise LatscopeError(f"DUT control: protocol version {data[2]}, this host speaks 1")
    request_id, status, _, length = struct.unpack_from(">HBBH", data, 4)
    if length != len(data) - 10:
        raise LatscopeError("DUT control: response length field disagrees with the datagram")
    return data[3] & 0x7F, request_id, status, bytes(data[10:])


class ControlClient:
    """Talk to the DUT's control port (UDP, default 4240)."""

    def __init__(self, host, port=4240, timeout=1.0, retries=3):
        self.address = (host, port)
        self.timeout, self.retries, self._id = timeout, retries, 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)

    def close(self):
        self.sock.close()

    def request(self, name, body=b""):
        """Send a request, return the reply body; LatscopeError on timeout or a non-OK status."""
        self._id = (self._id + 1) & 0xFFFF
        data = encode_request(OPCODES[name], self._id, body)
        for _ in range(self.retries):
            self.sock.sendto(data, self.address)
            try:
                while True:
                    op, rid, status, reply = decode_response(self.sock.recv(2048))
                    if rid == self._id:
                        break
            except socket.timeout:
                continue
            if status:
                reason = STATUS[status] if status < len(STATUS) else status
                raise LatscopeError(f"DUT control {name}: {reason}")
            return reply
        raise LatscopeError(f"DUT control {name}: no answer from {self.address[0]}:"
                            f"{self.address[1]} after {self.retries} tries")

    def info(self):
        """Build information as a dict (version, board, overlays, source_hash, ports, ...)."""
        text = self.request("get_info").decode("utf-8", "replace")
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def set_path(self, path):
        self.request("set_path", bytes([PATHS.index(path)]))

    def set_sizes(self, payload_sizes):
        self.request("set_sizes", bytes([len(payload_sizes)]) +
                     b"".join(struct.pack(">H", s) for s in payload_sizes))

    def counters(self):
        body = self.request("get_counters")
        values = struct.unpack_from(f">{body[0]}I", body, 1)
        return {COUNTERS[i] if i < len(COUNTERS) else f"counter{i}": v
                for i, v in enumerate(values)}


def load_experiment(path):
    """Read and check EXPERIMENT.toml; returns a dict with every key filled."""
    exp = read_toml(path, "experiment")
    exp.setdefault("name", Path(path).stem)
    exp.setdefault("configurations", ["default"])
    exp.setdefault("packets", 500)
    exp.setdefault("seed", 1)
    exp.setdefault("engine", "model")
    rate = exp.get("rate")
    if rate is not None and (not isinstance(rate, (int, float)) or not 0 < rate <= 1_000_000):
        raise LatscopeError(f"{path}: rate must be packets per second, 0 < rate <= 1,000,000")
    for key in ("target", "paths", "sizes"):
        if key not in exp:
            raise LatscopeError(f"{path}: missing key {key!r}")
    for key in ("paths", "sizes", "configurations"):
        if not isinstance(exp[key], list) or not exp[key]:
            raise LatscopeError(f"{path}: {key!r} must be a non-empty list")
    if not all(isinstance(s, int) and 64 <= s <= 1518 for s in exp["sizes"]):
        raise LatscopeError(f"{path}: sizes must be Ethernet frame bytes, 64 to 1518")
    if not isinstance(exp["packets"], int) or not 1 <= exp["packets"] <= 10_000_000:
        raise LatscopeError(f"{path}: packets must be an integer from 1 to 10,000,000")
    if "frames" in exp:     # frame classes for every capture (docs/capture-format.md)
        rules_from_dict(exp["frames"], str(path))
    if "load" in exp:       # sim only: background load beside the measured stream
        if exp["target"] != "sim":
            raise LatscopeError(f"{path}: load is for the simulated bench (target = \"sim\"); "
                                f"on hardware, send the background with your own generator")
        load_scenario(exp["load"])
    if exp["target"] != "sim":
        bad = [p for p in exp["paths"] if p not in PATHS]
        if bad:
            raise LatscopeError(f"{path}: hardware paths must be among {PATHS}, not {bad}")
        if "instrument" not in exp:
            raise LatscopeError(f"{path}: hardware target needs instrument = \"/dev/...\"")
    return exp


#: UDP + IPv4 + Ethernet header and FCS bytes between a UDP payload and the frame size.
FRAME_OVERHEAD = 14 + 20 + 8 + 4
DEFAULT_PORTS = {"socket": 4242, "netctx": 4243, "fast": 4244}


def dut_capture_config(info):
    """Capture-config TOML text carrying what the DUT said about its markers (GET_INFO).

    ``markers`` (``m0=rx.isr,...``) becomes the ``[markers]`` table, ``not_measured`` (points
    the firmware cannot mark on its board) a top-level list and the ``point.*`` lines (where
    the firmware takes each point) the ``[marker_points]`` table, so every capture's metadata
    says which marker is which point and where it was taken, and the analysis reports the
    points the board cannot mark as not measured.

    >>> print(dut_capture_config({"markers": "m1=rx.copy", "not_measured": "rx.isr,tx.xmit"}))
    not_measured = ["rx.isr", "tx.xmit"]
    [markers]
    m1 = "rx.copy"
    <BLANKLINE>
    """
    not_measured = [p for p in info.get("not_measured", "").split(",") if p]
    pairs = [kv.split("=", 1) for kv in info.get("markers", "").split(",") if "=" in kv]
    lines = [f"not_measured = {json.dumps(not_measured)}", "[markers]"]
    lines += [f"{k.strip()} = {json.dumps(v.strip())}" for k, v in pairs]
    where = {k[len("point."):]: v for k, v in info.items() if k.startswith("point.")}
    if where:                       # where the firmware takes each point (GET_INFO point.*)
        lines += ["[marker_points]"]
        lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in where.items()]
    return "\n".join(lines) + "\n"


def _record_cell(capture, source, file, config, limits, progress):
    """One cell's capture; returns ``(exit status, error message or None)``. An error the user
    can act on (bad port, incompatible instrument) fails the cell, not the whole run."""
    try:
        outcome = capture(source, str(file), config=config, limits=limits, overwrite=True,
                          progress=progress)
    except LatscopeError as error:
        return 2, str(error)
    return outcome.exit_status, None


def _hardware_cell(exp, path, size, file, record_cell, settle=0.2):
    """Capture and traffic of one hardware cell, concurrently.

    ``record_cell(duration)`` records the cell's capture, bounded by ``duration`` seconds.
    Returns ``(status, error, traffic)``."""
    packets, rate = exp["packets"], exp.get("rate")
    # Bound the capture: the traffic's own duration plus margin (one-in-flight: 1 s/packet max).
    seconds = packets / rate if rate else packets * 1.0
    result = {}

    def run_capture():
        result["status"] = record_cell(round(seconds + 5, 1))

    thread = threading.Thread(target=run_capture, name="latscope-capture", daemon=True)
    thread.start()
    time.sleep(settle)                      # let the capture open the port and start streaming
    ports = {**DEFAULT_PORTS, **exp.get("ports", {})}
    sent = traffic_mod.run_traffic((exp["target"], ports[path]), [size - FRAME_OVERHEAD],
                                   packets, rate=rate, one_in_flight=rate is None,
                                   duration=seconds + 1)
    traffic_mod.write_jsonl(sent, file.with_suffix(".sent.jsonl"),
                            {"target": exp["target"], "path": path, "frame_size": size},
                            force=True)      # beside the cell's capture, which it replaces too
    thread.join(seconds + 30)
    if thread.is_alive():
        raise LatscopeError(f"capture of cell {file.stem} did not end")
    status, error = result.get("status", (1, None))
    return status, error, sent


def run_experiment(exp, out_dir, *, capture=record, quiet=True):
    """Run every cell; return the summary dict (also written to ``out_dir/summary.json``).

    Parameters
    ----------
    exp : dict
        From :func:`load_experiment`.
    out_dir : str or Path
        Folder for the captures and ``summary.json``.
    capture : callable
        :func:`latscope.capture.record.record` or a stand-in with its parameters (``source``,
        ``output``, ``config``, ``limits``, ``overwrite``, ``progress``), returning a
        :class:`~latscope.capture.link.session.CaptureOutcome`. On hardware it runs in a thread
        while the traffic is sent.
    quiet : bool
        No progress line for the captures.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frames_text = ""
    if "frames" in exp:
        frames_text = "\n" + frames_toml(exp["frames"], exp["name"])
    cells = []
    client = None
    info = {}
    if exp["target"] != "sim":
        client = ControlClient(exp["target"], exp.get("control_port", 4240))
        info = client.info()
    try:
        for config in exp["configurations"]:
            if client is not None and config != "default" and config not in \
                    info.get("overlays", "").split(","):
                raise LatscopeError(f"configuration {config!r}: the DUT firmware was built "
                                    f"with overlays {info.get('overlays')!r}")
            for path in exp["paths"]:
                for size in exp["sizes"]:
                    name = f"{config}-{path}-{size}"
                    file = out / f"{name}.lsc"
                    progress = None if quiet else CaptureProgress()
                    if client is None:
                        capture_config = session.CaptureConfig()
                        if frames_text:
                            (out / "frames.toml").write_text(frames_text)
                            capture_config = session.load_config(out / "frames.toml")
                        capture_config.label = name
                        source = SimulatedSource(f"{path}-{size}", packets=exp["packets"],
                                                 seed=exp["seed"], load=exp.get("load"),
                                                 engine=exp["engine"])
                        status, error = _record_cell(
                            capture, source, file, capture_config,
                            session.Limits(packets=exp["packets"]), progress)
                        sent = None
                    else:
                        client.set_path(path)
                        client.set_sizes([size - FRAME_OVERHEAD])
                        dut_toml = out / "dut-markers.toml"
                        dut_toml.write_text(dut_capture_config(info) + frames_text)
                        capture_config = session.load_config(dut_toml)
                        capture_config.label = name

                        def record_cell(duration, capture_config=capture_config, file=file,
                                        progress=progress):
                            return _record_cell(
                                capture, exp["instrument"], file, capture_config,
                                session.Limits(duration=duration, packets=exp["packets"]),
                                progress)
                        status, error, sent = _hardware_cell(exp, path, size, file,
                                                             record_cell)
                    cell = {"configuration": config, "path": path, "size": size,
                            "capture": file.name, "exit_status": status,
                            "ok": status == 0 and file.exists()}
                    if error is not None:
                        cell["error"] = error
                    if sent is not None:
                        cell["traffic"] = {"file": file.with_suffix(".sent.jsonl").name,
                                           **sent.summary()}
                    cells.append(cell)
    finally:
        if client is not None:
            client.close()
    summary = {"experiment": exp["name"], "target": exp["target"], "packets": exp["packets"],
               "firmware": info, "cells": cells,
               "ok": all(c["ok"] for c in cells)}
    with open_output(out / "summary.json", force=True) as f:   # complete or the previous one
        f.write(json.dumps(summary, indent=2) + "\n")
    return summary
