"""Shared fixtures of the bindings' tests. CTest (tests/CMakeLists.txt) runs them with
Debian's /usr/bin/python3, PYTHONPATH at the build tree's python/ (the package as
`cmake --build` makes it) and ORDO_CLI, ORDO_SOURCE_DIR, ORDO_BUILD_DIR set. The CLI is
the oracle for results: the tests compare what Python gets with what `ordo ... --json`
prints for the same input and options."""

import json
import os
import pathlib
import subprocess

import pytest

# The default model is part of what is tested: no inherited $ORDO_MODEL.
os.environ.pop("ORDO_MODEL", None)

import ordo  # noqa: E402  (after the environment is settled)

SOURCE_DIR = pathlib.Path(os.environ.get("ORDO_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))
BUILD_DIR = pathlib.Path(os.environ.get("ORDO_BUILD_DIR", SOURCE_DIR / "build"))
CLI = os.environ.get("ORDO_CLI", str(BUILD_DIR / "ordo"))
WEIGHTS = SOURCE_DIR / "weights"
TEST_TSV = WEIGHTS / "data" / "test.tsv"


def cli(*args, input_text=None):
    """Runs the ordo CLI; its stdout. Fails the test with its stderr when it fails."""
    done = subprocess.run([CLI, *args], input=input_text, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"ordo {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def cli_json(*args, input_text=None):
    """The CLI's --json output: one object per line."""
    return [json.loads(line) for line in cli(*args, "--json", input_text=input_text).splitlines() if line]


def test_sentences(count):
    """The first `count` source sentences of weights/data/test.tsv."""
    with open(TEST_TSV, encoding="utf-8") as lines:
        return [line.split("\t")[0] for _, line in zip(range(count), lines)]


test_sentences.__test__ = False  # a helper, not a test


@pytest.fixture(scope="session")
def translator():
    return ordo.Translator("sinusoidal")


@pytest.fixture(scope="session")
def generator():
    return ordo.Generator("german-llama")
