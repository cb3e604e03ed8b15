"""The one output policy (``latscope.capture.files.outputs``): same-file refusal, existing outputs,
write-then-rename, direct outputs, result folders, and no temporary file left on any exit path."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from latscope import LatscopeError, Terminated
from latscope.capture.files import outputs
from latscope.capture.files.outputs import (
    check_output,
    check_output_folder,
    exists_message,
    is_direct,
    open_output,
    output_folder,
    replacing,
    same_file,
)


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def _read(path):
    with open(path) as handle:
        return handle.read()


def _temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(outputs.TEMP_SUFFIX))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "in.lsc"
    _write(path, "input bytes")
    return path


# --- same file as an input -----------------------------------------------------------------------
@pytest.mark.parametrize("force", [False, True])
def test_the_input_itself_is_refused_with_or_without_force(source, force):
    with pytest.raises(LatscopeError, match="is the input .*--force never replaces an input"):
        check_output(source, [source], force=force)
    with pytest.raises(LatscopeError, match="is the input"):
        with replacing(source, source, force=force):
            pytest.fail("the block must not run")
    assert _read(source) == "input bytes"


@pytest.mark.parametrize("force", [False, True])
def test_a_symbolic_link_to_the_input_is_refused(tmp_path, source, force):
    link = tmp_path / "link.lsc"
    link.symlink_to(source)
    with pytest.raises(LatscopeError, match="is the input"):
        with open_output(link, [source], force=force) as handle:
            handle.write("x")
    assert _read(source) == "input bytes" and link.is_symlink()


@pytest.mark.parametrize("force", [False, True])
def test_a_hard_link_of_the_input_is_refused(tmp_path, source, force):
    hard = tmp_path / "hard.lsc"
    os.link(source, hard)
    assert same_file(hard, source)
    with pytest.raises(LatscopeError, match="is the input"):
        with open_output(hard, [source], force=force) as handle:
            handle.write("x")
    assert _read(source) == "input bytes"


def test_a_differently_spelt_path_to_the_input_is_refused(tmp_path, source):
    spelt = os.path.join(str(tmp_path), ".", "..", tmp_path.name, "in.lsc")
    with pytest.raises(LatscopeError, match="is the input"):
        check_output(spelt, [str(source)], force=True)


def test_other_files_are_not_the_input(tmp_path, source):
    other = tmp_path / "other.lsc"
    _write(other, "input bytes")            # same content, another inode
    assert not same_file(other, source)
    assert not same_file(tmp_path / "missing", source)


# --- existing outputs ----------------------------------------------------------------------------
def test_an_existing_output_is_refused_without_force_with_the_one_message(tmp_path):
    out = tmp_path / "out.csv"
    _write(out, "previous")
    with pytest.raises(LatscopeError) as caught:
        check_output(out)
    assert str(caught.value) == exists_message(out) == f"{out} exists; choose another name or " \
                                                      f"use --force"
    with pytest.raises(LatscopeError, match="exists; choose another name or use --force"):
        with open_output(out) as handle:
            handle.write("new")
    assert _read(out) == "previous"


def test_force_replaces_an_existing_output(tmp_path):
    out = tmp_path / "out.csv"
    _write(out, "previous")
    with open_output(out, force=True) as handle:
        handle.write("new")
    assert _read(out) == "new"
    assert _temporaries(tmp_path) == []


def test_a_folder_or_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(LatscopeError, match="is a folder; give a file name"):
        check_output(tmp_path, force=True)
    with pytest.raises(LatscopeError, match="does not exist"):
        check_output(tmp_path / "nowhere" / "out.csv")


def test_a_symbolic_link_output_stays_a_link_and_its_target_is_replaced(tmp_path):
    target = tmp_path / "target.csv"
    _write(target, "previous")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    with open_output(link, force=True) as handle:
        handle.write("new")
    assert link.is_symlink() and _read(target) == "new"


# --- write, then rename --------------------------------------------------------------------------
def test_the_output_appears_only_when_complete(tmp_path):
    out = tmp_path / "out.bin"
    with replacing(out) as temp:
        assert os.path.dirname(temp) == str(tmp_path) and temp.endswith(outputs.TEMP_SUFFIX)
        assert not out.exists()
        with open(temp, "wb") as handle:
            handle.write(b"data")
    assert out.read_bytes() == b"data" and _temporaries(tmp_path) == []


@pytest.mark.parametrize("error, raised", [
    (RuntimeError("writer failed"), RuntimeError),
    (OSError(28, "No space left on device"), LatscopeError),     # one line naming the output
    (KeyboardInterrupt(), KeyboardInterrupt), (Terminated(), Terminated)])
def test_an_interrupted_write_leaves_the_previous_file_and_no_temporary(tmp_path, error, raised):
    out = tmp_path / "out.csv"
    _write(out, "previous")
    with pytest.raises(raised):
        with open_output(out, force=True) as handle:
            handle.write("half a file")
            handle.flush()
            raise error
    assert _read(out) == "previous"
    assert _temporaries(tmp_path) == []


def test_a_full_disk_is_one_line_naming_the_output(tmp_path):
    out = tmp_path / "out.csv"
    with pytest.raises(LatscopeError) as caught:
        with open_output(out):
            raise OSError(28, "No space left on device")
    assert str(caught.value) == f"cannot write {out}: No space left on device"
    assert os.listdir(tmp_path) == []


def test_an_interrupted_write_of_a_new_file_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with open_output(tmp_path / "new.csv") as handle:
            handle.write("half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


SIGTERM_CHILD = textwrap.dedent("""
    import signal, sys, time
    from latscope import Terminated
    from latscope.capture.files.outputs import open_output

    def stop(signum, frame):
        raise Terminated
    signal.signal(signal.SIGTERM, stop)
    try:
        with open_output(sys.argv[1], force=True) as handle:
            handle.write("partial\\n")
            handle.flush()
            print("writing", flush=True)
            time.sleep(60)
    except Terminated:
        sys.exit(143)
""")


def test_sigterm_mid_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    out = tmp_path / "out.csv"
    _write(out, "previous")
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, str(out)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "writing\n"
        assert len(_temporaries(tmp_path)) == 1        # the write really was under way
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 143
    finally:
        child.stdout.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert _read(out) == "previous"
    assert _temporaries(tmp_path) == []


def test_a_read_only_folder_is_one_clear_line_and_leaves_nothing(tmp_path):
    """A read-only mount refuses even root (chmod does not), so the folder is a read-only tmpfs
    in a private mount namespace of a child process."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed: no private read-only mount")
    folder = tmp_path / "ro"
    folder.mkdir()
    code = ("import sys\nfrom latscope import LatscopeError\n"
            "from latscope.capture.files.outputs import open_output\n"
            "try:\n"
            "    with open_output(sys.argv[1] + '/out.csv') as h:\n"
            "        h.write('x')\n"
            "except LatscopeError as e:\n"
            "    print(e)\n")
    script = f'mount -t tmpfs -o ro,size=64k tmpfs "$1" && exec "{sys.executable}" -c "$2" "$1"'
    result = subprocess.run([unshare, "-rm", "sh", "-c", script, "sh", str(folder), code],
                            capture_output=True, text=True)
    if result.returncode and "mount" in result.stderr:
        pytest.skip(f"no private read-only mount here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cannot write into {folder}: Read-only file system"
    assert os.listdir(folder) == []


# --- direct outputs ------------------------------------------------------------------------------
def test_standard_output_is_written_directly(capsys):
    assert is_direct("-") and is_direct("/dev/stdout") and is_direct("/dev/null")
    with open_output("-") as handle:
        handle.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


def test_standard_output_is_refused_where_the_format_is_no_stream(tmp_path):
    from latscope.capture.files.reimport import import_export
    csv_file = tmp_path / "a.csv"
    _write(csv_file, "# latscope {\"tick_hz\": 1000}\ntime_ns,channel,edge\n")
    for call in (lambda: check_output("-", allow_stdout=False),
                 lambda: import_export(csv_file, "-")):
        with pytest.raises(LatscopeError, match="cannot be written to standard output"):
            call()
    assert sorted(os.listdir(tmp_path)) == ["a.csv"]


def test_dev_stdout_redirected_to_a_file_is_written_through_the_shell_s_file(tmp_path):
    """``-o /dev/stdout > out.csv``: /dev/stdout resolves to the regular file out.csv, which the
    shell holds open; it is written through, not replaced behind the shell's back."""
    out = tmp_path / "out.csv"
    code = ("from latscope.capture.files.outputs import open_output\n"
            "with open_output('/dev/stdout') as h:\n"
            "    h.write('through stdout')\n")
    with open(out, "w") as handle:
        subprocess.run([sys.executable, "-c", code], stdout=handle, check=True, timeout=60)
    assert _read(out) == "through stdout" and _temporaries(tmp_path) == []


def test_a_regular_file_under_dev_is_no_device(tmp_path):
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    path = f"/dev/shm/latscope-test-{os.getpid()}.csv"
    _write(path, "previous")
    try:
        assert not is_direct(path)
        with pytest.raises(LatscopeError, match="exists; choose another name"):
            check_output(path)
    finally:
        os.unlink(path)


def test_a_device_is_written_directly_and_never_replaced(tmp_path):
    with open_output("/dev/null") as handle:
        handle.write("discarded")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_a_fifo_is_written_directly_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert is_direct(fifo)
    received = []

    def drain():
        with open(fifo) as handle:
            received.append(handle.read())

    reader = threading.Thread(target=drain)
    reader.start()
    with open_output(fifo) as handle:         # exists, but is no regular file: no --force needed
        handle.write("through the pipe")
    reader.join(timeout=30)
    assert received == ["through the pipe"]
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    assert _temporaries(tmp_path) == []


# --- folders of results --------------------------------------------------------------------------
def test_a_new_results_folder_appears_only_when_complete(tmp_path):
    results = tmp_path / "results"
    with output_folder(results) as folder:
        assert not results.exists()
        _write(os.path.join(folder, "a.lsc"), "a")
    assert sorted(os.listdir(results)) == ["a.lsc"]
    assert os.listdir(tmp_path) == ["results"]


def test_a_failed_new_results_folder_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with output_folder(tmp_path / "results") as folder:
            _write(os.path.join(folder, "a.lsc"), "a")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_a_results_folder_with_files_is_refused_without_force(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _write(results / "old.lsc", "earlier run")
    with pytest.raises(LatscopeError, match="holds files; choose another folder or use --force"):
        check_output_folder(results)
    with output_folder(results, force=True) as folder:
        assert folder == str(results)
    assert _read(results / "old.lsc") == "earlier run"


def test_an_empty_results_folder_is_accepted_and_a_file_is_not(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    check_output_folder(empty)
    plain = tmp_path / "file"
    _write(plain, "x")
    with pytest.raises(LatscopeError, match="is not a folder"):
        check_output_folder(plain, force=True)


# --- the policy in the library's writers ---------------------------------------------------------
META = {"tick_hz": 1_000_000, "channels": {"0": "rx_dv", "1": "tx_en"},
        "markers": {}, "label": "policy"}


def _capture(path):
    from latscope.capture.files.capfile import CaptureWriter
    with CaptureWriter(path, META, fsync=False) as writer:
        writer.append_events([10, 20, 30, 40], [0, 1, 0, 1], [1, 1, 0, 0])
    return path


def _window(cap):
    from latscope.capture.files.interop import make_window
    return make_window(cap, None, None, None)


@pytest.mark.parametrize("fmt", ["sr", "vcd", "csv"])
def test_an_export_never_replaces_its_capture_even_by_a_hard_link(tmp_path, fmt):
    from latscope.capture.files.capfile import open_capture
    from latscope.capture.files.interop import export_csv
    from latscope.capture.files.sigrok_write import export_sr
    from latscope.capture.files.vcd import export_vcd
    source = _capture(tmp_path / "in.lsc")
    before = source.read_bytes()
    hard = tmp_path / f"alias.{fmt}"
    os.link(source, hard)
    with open_capture(source) as cap:
        window = _window(cap)
        write = {"sr": lambda out: export_sr(window, out, 1_000_000, force=True),
                 "vcd": lambda out: export_vcd(window, out, force=True),
                 "csv": lambda out: export_csv(window, out, force=True)}[fmt]
        with pytest.raises(LatscopeError, match="is the input"):
            write(hard)
        write(tmp_path / f"ok.{fmt}")
    assert source.read_bytes() == before
    assert (tmp_path / f"ok.{fmt}").stat().st_size > 0
    assert _temporaries(tmp_path) == []


def test_an_export_that_fails_midway_leaves_the_previous_file(tmp_path):
    from latscope.capture.files.capfile import open_capture
    from latscope.capture.files.interop import export_csv
    source = _capture(tmp_path / "in.lsc")
    out = tmp_path / "out.csv"
    _write(out, "previous export")
    with open_capture(source) as cap:
        window = _window(cap)

        def failing_blocks(include_start=False):
            yield from []
            raise KeyboardInterrupt
        window.blocks = failing_blocks
        with pytest.raises(KeyboardInterrupt):
            export_csv(window, out, force=True)
    assert _read(out) == "previous export"
    assert _temporaries(tmp_path) == []


def test_an_import_of_a_sigrok_file_onto_itself_keeps_the_input(tmp_path):
    from latscope.capture.files.capfile import open_capture
    from latscope.capture.files.sigrok_import import import_sr
    from latscope.capture.files.sigrok_write import export_sr
    source = _capture(tmp_path / "in.lsc")
    recording = tmp_path / "a.sr"
    with open_capture(source) as cap:
        export_sr(_window(cap), recording, 1_000_000)
    before = recording.read_bytes()
    for target in (recording, tmp_path / "link.sr"):
        if target != recording:
            target.symlink_to(recording)
        with pytest.raises(LatscopeError, match="is the input"):
            import_sr(recording, target, force=True)
    assert recording.read_bytes() == before
    summary = import_sr(recording, tmp_path / "back.lsc")
    assert summary.events > 0 and _temporaries(tmp_path) == []


@pytest.mark.parametrize("fmt", ["vcd", "csv"])
def test_a_reimport_onto_its_own_export_keeps_the_input(tmp_path, fmt):
    from latscope.capture.files.capfile import open_capture
    from latscope.capture.files.interop import export_csv
    from latscope.capture.files.reimport import import_export
    from latscope.capture.files.vcd import export_vcd
    source = _capture(tmp_path / "in.lsc")
    exported = tmp_path / f"a.{fmt}"
    with open_capture(source) as cap:
        (export_vcd if fmt == "vcd" else export_csv)(_window(cap), exported)
    before = exported.read_bytes()
    with pytest.raises(LatscopeError, match="is the input"):
        import_export(exported, exported, force=True)
    assert exported.read_bytes() == before
    existing = tmp_path / "existing.lsc"
    _write(existing, "keep me")
    with pytest.raises(LatscopeError, match="exists; choose another name or use --force"):
        import_export(exported, existing)
    assert _read(existing) == "keep me"
    import_export(exported, existing, force=True)
    with open_capture(existing) as cap:
        assert cap.n_events == 4
    assert _temporaries(tmp_path) == []


def test_an_hlog_never_replaces_the_capture_it_describes(tmp_path):
    hdrh = pytest.importorskip("hdrh.histogram")
    from latscope.analysis.hdr import write_hlog
    source = _capture(tmp_path / "in.lsc")
    before = source.read_bytes()
    histogram = hdrh.HdrHistogram(1, 10**9, 3)
    histogram.record_value(1000)
    with pytest.raises(LatscopeError, match="is the input"):
        write_hlog(source, [("rx.udp", 0.0, 1.0, histogram)], inputs=[source], force=True)
    assert source.read_bytes() == before
    out = tmp_path / "x.hlog"
    write_hlog(out, [("rx.udp", 0.0, 1.0, histogram)], inputs=[source])
    with pytest.raises(LatscopeError, match="exists; choose another name or use --force"):
        write_hlog(out, [("rx.udp", 0.0, 1.0, histogram)], inputs=[source])
