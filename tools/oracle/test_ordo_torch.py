#!/usr/bin/python3
"""Self-checks of the PyTorch oracle (tools/oracle/ordo_torch/) and the parity-model generator:
every test module in tools/oracle/tests/, in one run, whose exit status is 0 only if all pass.

    /usr/bin/python3 tools/oracle/test_ordo_torch.py [-v] [-k PATTERN]
"""
from __future__ import annotations

import unittest
from pathlib import Path

TESTS = Path(__file__).resolve().parent / "tests"


def load_tests(loader: unittest.TestLoader, standard_tests, pattern) -> unittest.TestSuite:
    suite = loader.discover(str(TESTS), top_level_dir=str(TESTS))
    if not suite.countTestCases():  # a run of nothing would pass
        raise RuntimeError(f"no tests found in {TESTS}")
    return suite


if __name__ == "__main__":
    unittest.main()
