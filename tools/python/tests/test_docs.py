"""Documentation: every public class, method and property has a docstring, the stubs
(_ordo.pyi) name what the compiled module has, and the README's Python examples run
as written."""

import ast
import inspect
import pathlib
import re
import subprocess
import sys

import ordo
from ordo import _ordo
from conftest import SOURCE_DIR


def public_members(cls):
    return [(name, member) for name, member in vars(cls).items() if not name.startswith("_")]


def test_everything_public_has_a_docstring():
    assert ordo.__doc__ and "ordo.Translator" in ordo.__doc__
    for name in ordo.__all__:
        thing = getattr(ordo, name)
        assert inspect.getdoc(thing), name
        if inspect.isclass(thing):
            for member_name, member in public_members(thing):
                assert inspect.getdoc(member), f"{name}.{member_name}"


def test_help_teaches_the_keywords():
    text = inspect.getdoc(ordo.Translator.translate_batch)
    for keyword in ["beam_size", "num_hypotheses", "sampling_topk", "max_batch_size", "OptionError"]:
        assert keyword in text, keyword
    assert "generate_tokens" in inspect.getdoc(ordo.Generator) or "generate_tokens" in ordo.__doc__


def test_the_stubs_name_what_the_compiled_module_has():
    stub = ast.parse((pathlib.Path(_ordo.__file__).parent / "_ordo.pyi").read_text(encoding="utf-8"))
    stubbed = {node.name: node for node in stub.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    compiled = {name for name in dir(_ordo) if not name.startswith("_")}
    assert set(stubbed) == compiled
    for name, node in stubbed.items():
        if isinstance(node, ast.ClassDef):
            functions = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            assert all(hasattr(getattr(_ordo, name), f) for f in functions), name  # dunders too
            members = {f for f in functions if not f.startswith("_")}
            actual = {m for m in dir(getattr(_ordo, name)) if not m.startswith("_")}
            if not issubclass(getattr(_ordo, name), BaseException):
                assert members == actual, name


def test_the_python_layers_stubs_match_its_signatures():
    # translator.pyi and generator.pyi beside the code: each method with the same
    # parameters, in the same order, with the same defaults.
    package = pathlib.Path(ordo.__file__).parent
    for cls, stub_file in [(ordo.Translator, "translator.pyi"), (ordo.Generator, "generator.pyi")]:
        stub = ast.parse((package / stub_file).read_text(encoding="utf-8"))
        (stub_class,) = [n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
        stubbed = {f.name: f for f in stub_class.body if isinstance(f, ast.FunctionDef)}
        public = {name for name, _ in public_members(cls)} | {"__init__"}
        assert set(stubbed) == public, cls.__name__
        for name, node in stubbed.items():
            if isinstance(getattr(cls, name), property):
                continue
            actual = inspect.signature(getattr(cls, name))
            names = [a.arg for a in node.args.args]
            assert names == list(actual.parameters), f"{cls.__name__}.{name}"
            defaults = [ast.literal_eval(d) for d in node.args.defaults]
            want = [p.default for p in actual.parameters.values() if p.default is not inspect.Parameter.empty]
            assert defaults == want, f"{cls.__name__}.{name}"


def readme_python_examples():
    readme = (SOURCE_DIR / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readmes_python_examples_run_as_written():
    examples = readme_python_examples()
    assert len(examples) >= 3
    for example in examples:
        done = subprocess.run([sys.executable, "-c", example], cwd=SOURCE_DIR, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (example, done.stderr)
        # Each example states its output in a comment: "# -> text".
        for expected in re.findall(r"# -> (.+)", example):
            assert expected.strip() in done.stdout, (example, done.stdout)
