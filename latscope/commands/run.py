"""``latscope run EXPERIMENT.toml``: an experiment matrix (paths x sizes x configurations), one
capture per cell, and its summary."""

import json
import os

from latscope.capture.files.outputs import check_output_folder
from latscope.capture.runner import load_experiment, run_experiment
from latscope.userio import check_input


def add_arguments(p):
    p.description = ("Run EXPERIMENT.toml: one capture per cell of paths x sizes (Ethernet frame "
                     "bytes) x configurations, against the simulated bench (target = \"sim\") or "
                     "a DUT (target = its address, selected over its control port), and write "
                     "OUT/summary.json listing every cell's capture file.")
    p.add_argument("experiment", metavar="EXPERIMENT.toml")
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default: ./NAME)")
    p.add_argument("--force", action="store_true",
                   help="write into an output folder that already holds files (captures of the "
                        "same cells are replaced)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args):
    check_input(args.experiment, "experiment file")
    exp = load_experiment(args.experiment)
    folder = args.output or exp["name"]
    check_output_folder(folder, [args.experiment], force=args.force)   # before any capture
    # written in place, not built under a temporary name: every capture is finalised whatever
    # stops the run, so an interrupted run keeps what it measured
    os.makedirs(folder, exist_ok=True)
    summary = run_experiment(exp, folder)
    if args.json:
        print(json.dumps(summary))
    else:
        good = sum(c["ok"] for c in summary["cells"])
        print(f"{exp['name']}: {good}/{len(summary['cells'])} cells captured")
    return 0 if summary["ok"] else 1
