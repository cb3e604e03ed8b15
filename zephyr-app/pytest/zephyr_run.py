"""Running the DUT firmware for the traffic tests: QEMU's Zynq-7000 on a user-mode network, and
native_sim inside a network namespace, each stopped when its ``with`` block ends.

Standard library only: twister's pytest (``test_traffic.py`` beside this file) runs without
latscope installed; latscope's own ``capture/tests/test_zephyr_integration.py`` uses it too.
"""

import contextlib
import socket
import subprocess
import time
from pathlib import Path

#: The firmware's control port (docs/zephyr-app.md) and the guest's address on QEMU's user network.
CONTROL_PORT = 4240
QEMU_GUEST = "10.0.2.15"
#: The firmware's address on native_sim's TAP link, and the host side's (inside the namespace).
NATIVE_SIM_GUEST, NATIVE_SIM_TAP = "192.0.2.1", "192.0.2.2"


def free_udp_port():
    """A UDP port of 127.0.0.1 that nothing is bound to now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, predicate, seconds):
    """Poll a console log until ``predicate(text)`` or the time is up; return the text."""
    deadline = time.monotonic() + seconds
    while True:
        text = Path(path).read_text(errors="replace")
        if predicate(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


@contextlib.contextmanager
def qemu_zynq(elf, log, forwards):
    """QEMU's Zynq-7000 (``-icount``: time counted in instructions) running ``elf``, its first
    UART written to the file ``log``, with each host UDP port of 127.0.0.1 forwarded to the
    guest's port (``forwards``: {host port: guest port}) over the GEM's user-mode network."""
    Path(log).touch()
    fwd = [f"hostfwd=udp:127.0.0.1:{host}-{QEMU_GUEST}:{guest}"
           for host, guest in forwards.items()]
    proc = subprocess.Popen(
        ["qemu-system-arm", "-M", "xilinx-zynq-a9", "-cpu", "cortex-a9", "-m", "64",
         "-nographic", "-serial", f"file:{log}", "-serial", "null", "-monitor", "none",
         "-icount", "shift=3,align=off,sleep=on", "-rtc", "clock=vm", "-kernel", str(elf),
         "-nic", "user,model=cadence_gem,net=10.0.2.0/24," + ",".join(fwd)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def native_sim_in_netns(exe, log, ns):
    """native_sim's ``exe`` inside a new network namespace ``ns`` (deleted on leaving), its
    console written to the file ``log``; its TAP device ``zeth`` is given the host side's
    address and brought up. Yields the command prefix that runs a program inside the namespace.
    Needs root and iproute2."""
    subprocess.run(["ip", "netns", "add", ns], check=True)
    prefix = ["ip", "netns", "exec", ns]
    proc = None
    try:
        with open(log, "w") as console:
            proc = subprocess.Popen([*prefix, str(exe)], stdout=console,
                                    stderr=subprocess.STDOUT)
        for _ in range(50):                      # bounded wait for the TAP device to appear
            if subprocess.run([*prefix, "ip", "link", "show", "zeth"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run([*prefix, "ip", "addr", "add", f"{NATIVE_SIM_TAP}/24", "dev", "zeth"],
                       check=True)
        subprocess.run([*prefix, "ip", "link", "set", "zeth", "up"], check=True)
        yield prefix
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns])
