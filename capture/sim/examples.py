"""Example captures for notebooks and docs: the simulated bench's paper profiles as ``.lsc`` files.

:func:`example_captures` returns ``fixtures/bench/PROFILE.lsc`` where the source tree has it and
otherwise simulates the profile now (:func:`latscope.capture.sim.simbench.simulate`, the DUT model
only, without the gateware) and writes a capture with its ground truth beside it.
"""

import os
import pathlib
import tempfile

from latscope.capture.files import capfile
from latscope.capture.sim import simbench

__all__ = ["example_captures", "fixture_directory"]


def fixture_directory():
    """The source tree's ``fixtures/bench`` folder, or ``None`` in an installed copy (the nearest
    folder above this module that holds both ``pyproject.toml`` and ``fixtures/bench``)."""
    for parent in pathlib.Path(__file__).resolve().parents:
        bench = parent / "fixtures" / "bench"
        if (parent / "pyproject.toml").is_file() and bench.is_dir():
            return str(bench)
    return None


def example_captures(profiles, *, packets=1200, directory=None, seed=0):
    """Paths of simulated-bench captures for ``profiles`` (e.g. ``["gem-64", "el-dm-64"]``).

    Uses ``fixtures/bench/PROFILE.lsc`` where the source tree has it; otherwise simulates the
    profile now and writes a capture into ``directory`` (default: a new temporary folder).

    Returns
    -------
    paths : list of str
    provenance : dict of str -> str
        Per profile, ``"fixture"`` or ``"simulated now"``.
    """
    fixtures = fixture_directory()
    paths, provenance = [], {}
    for profile in profiles:
        fixture = os.path.join(fixtures, f"{profile}.lsc") if fixtures else None
        if fixture and os.path.exists(fixture):
            paths.append(fixture)
            provenance[profile] = "fixture"
            continue
        directory = directory or tempfile.mkdtemp(prefix="latscope-")
        run = simbench.simulate(profile, packets, seed=seed)
        t = run.truth
        meta = {"tick_hz": run.meta["tick_hz"],
                "channels": {str(k): v for k, v in enumerate(simbench.CHANNEL_ROLES)},
                "markers": run.meta["markers"], "label": profile,
                "frame_bytes": run.meta["frame_bytes"],
                "simbench": dict(run.meta, engine="none (events from the DUT model)")}
        path = os.path.join(directory, f"{profile}.lsc")
        with capfile.CaptureWriter(path, meta, fsync=False, overwrite=True) as writer:
            writer.append_events(t["time"], t["channel"], t["rising"])
        run.save_truth(path)
        paths.append(path)
        provenance[profile] = "simulated now"
    return paths, provenance
