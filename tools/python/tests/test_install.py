"""The package as `cmake --install` puts it: <prefix>/lib/python3/dist-packages/ordo,
imported from a fresh process anywhere on the disk, finds libordo.so and the default
model under the same prefix."""

import os
import subprocess
import sys

from conftest import BUILD_DIR


def test_the_installed_package_imports_and_translates_from_its_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(BUILD_DIR), "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=300)
    package = prefix / "lib" / "python3" / "dist-packages"
    assert (package / "ordo" / "__init__.py").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORDO_MODEL")}
    env["PYTHONPATH"] = str(package)
    program = ("import ordo; print(ordo.__file__); print(ordo.Translator().model_dir); "
               "print(ordo.Translator().translate('cats chase dogs')); "
               "print(ordo.Generator().model_dir); print(len(ordo.models()))")
    # From / : nothing of the source or build tree is near.
    done = subprocess.run([sys.executable, "-c", program], cwd="/", env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    module, model, translation, language_model, count = done.stdout.splitlines()
    assert module.startswith(str(package))
    assert model == str(prefix / "share" / "ordo" / "sinusoidal")
    assert translation == "Katzen jagen Hunde"
    assert language_model == str(prefix / "share" / "ordo" / "german-llama")
    assert int(count) >= 8
