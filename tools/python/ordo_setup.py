"""setuptools commands for `pip install .` (pyproject.toml names them): the package's
Python files are copied as usual, and CMake builds and installs the compiled part
beside them with ORDO_PYTHON_WHEEL=ON, which puts libordo.so and the shipped models
inside the package (ordo/lib, ordo/share/ordo), where the extension and the library
find them. Not part of the installed package."""

import os
import pathlib
import subprocess
import sys

from setuptools.command.build import build
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


class Build(build):
    """setuptools' build, in build/pip: build/ is CMake's, and its lib/ and temp/
    would otherwise land between the CMake targets."""

    def initialize_options(self):
        super().initialize_options()
        self.build_base = str(SOURCE_DIR / "build" / "pip")


class BuildWithCMake(build_py):
    """Copies the Python files, then configures, builds and installs the extension."""

    def run(self):
        super().run()
        cmake_dir = pathlib.Path(self.get_finalized_command("build").build_temp) / "cmake"
        jobs = os.environ.get("ORDO_BUILD_JOBS", "2")
        subprocess.run(["cmake", "-S", str(SOURCE_DIR), "-B", str(cmake_dir), "-DCMAKE_BUILD_TYPE=Release",
                        "-DORDO_BUILD_TESTS=OFF", "-DORDO_PYTHON_WHEEL=ON", f"-DORDO_PYTHON={sys.executable}"],
                       check=True)
        subprocess.run(["cmake", "--build", str(cmake_dir), "-j", jobs, "--target", "ordo_python"], check=True)
        subprocess.run(["cmake", "--install", str(cmake_dir), "--component", "python", "--prefix",
                        str(pathlib.Path(self.build_lib).resolve())], check=True)


class PlatformWheel(bdist_wheel):
    """The wheel holds compiled code: tag it for this platform and Python, not "any"."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False
