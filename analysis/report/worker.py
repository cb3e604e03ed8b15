"""A figure-drawing worker for :func:`latscope.analysis.report.html.write_report`: run as
``python -m latscope.analysis.report.worker``, it reads a pickled list of ``(stem, kind, data,
alt)`` jobs from stdin and writes the pickled ``[(stem, png)]`` to stdout."""

import pickle
import sys

from latscope.analysis.report.figures import draw_job

if __name__ == "__main__":
    pickle.dump([draw_job(job) for job in pickle.load(sys.stdin.buffer)], sys.stdout.buffer)
