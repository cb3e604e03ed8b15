"""The build backend: setuptools' own, with one informational warning silenced.

pip (>= 25) prints every warning a build backend raises. setuptools raises an ``InformationOnly``
"Editable installation ... be careful with folders in your working directory" notice on every
editable install of a project whose packages live in remapped folders (``latscope.capture`` in
``capture/``), as a boxed block of asterisks. It is not a problem to act on here: ``latscope/`` in
the project root is the real package. Everything else (real warnings, errors) passes through.
"""

import warnings

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517/660 hooks)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*Editable installation\.")
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
