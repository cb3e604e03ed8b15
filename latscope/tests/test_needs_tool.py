"""The ``needs_tool`` marker skips with the tool's name when the program is absent."""

from pathlib import Path

ROOT_CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"

pytest_plugins = ["pytester"]


def test_needs_tool_skips_a_missing_program_with_its_name(pytester):
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    needs_tool(name): needs a program\n")
    pytester.makepyfile("""
        import pytest

        @pytest.mark.needs_tool("latscope-no-such-program")
        def test_missing():
            raise AssertionError("must not run")

        @pytest.mark.needs_tool("sh")
        def test_present():
            pass
    """)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*needs latscope-no-such-program, which is not installed*"])
