"""Declared versions are tested versions (issue 43): pyproject.toml, environment.yml and
course_lib's import-time check name the same minimums, CI's lower-bound job reads them from
pyproject, and `import course_lib` with an older transformers says so in one line."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from course_lib import _versions
from course_lib._versions import MINIMUM_VERSIONS, VersionWarning, message, outdated, release

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lower_bounds", ROOT / "tools/lower_bounds.py")
lower_bounds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lower_bounds)


def environment_yml_bounds() -> dict[str, str]:
    """The `>=` bounds environment.yml gives torch (conda's `pytorch`) and the three HF packages."""
    bounds = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.fullmatch(r"\s*-\s*(pytorch|torch|transformers|tokenizers|safetensors)>=(\S+)", line)
        if m:
            bounds["torch" if m.group(1) == "pytorch" else m.group(1)] = m.group(2)
    return bounds


def test_pyproject_environment_yml_and_the_code_declare_the_same_minimums():
    declared = lower_bounds.lower_bounds((ROOT / "pyproject.toml").read_text())
    assert set(MINIMUM_VERSIONS) == {"torch", "transformers", "tokenizers", "safetensors"}
    assert {name: declared[name] for name in MINIMUM_VERSIONS} == MINIMUM_VERSIONS
    assert environment_yml_bounds() == MINIMUM_VERSIONS


def test_ci_installs_exactly_the_declared_lower_bounds():
    text = (ROOT / "pyproject.toml").read_text()
    assert lower_bounds.pins(text) == [
        f"{name}=={MINIMUM_VERSIONS[name]}"
        for name in ("transformers", "tokenizers", "safetensors")
    ]
    script = (ROOT / ".ci" / "lower-bounds").read_text()
    assert "python3 tools/lower_bounds.py transformers tokenizers safetensors" in script
    assert '"torch==2.13.0"' in script and '"${pins[@]}"' in script
    assert "bash .ci/lower-bounds" in (ROOT / ".ci" / "run").read_text()
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools/lower_bounds.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == lower_bounds.pins(text)


def test_lower_bounds_names_a_package_without_a_bound():
    text = '[project]\ndependencies = ["torch>=2.13.0", "numpy"]\n'
    assert lower_bounds.lower_bounds(text) == {"torch": "2.13.0"}
    with pytest.raises(KeyError, match="no '>=' bound for numpy"):
        lower_bounds.pins(text, ["torch", "numpy"])


@pytest.mark.parametrize(
    ("have", "need", "ok"),
    [
        ("2.13.0+cpu", "2.13.0", True),
        ("5.17", "5.17.0", True),
        ("5.25.0", "5.17.0", True),
        ("5.9.0", "5.17.0", False),  # numeric, not string, comparison
        ("4.57.1", "5.17.0", False),
        ("0.23.0", "0.23.1", False),
        ("1.0.0rc1", "0.8.0", True),
    ],
)
def test_release_compares_numerically(have, need, ok):
    assert (release(have) >= release(need)) is ok


def test_a_recent_environment_gives_no_line():
    assert outdated(lambda name: "99.0") == []
    assert message(outdated(lambda name: "99.0")) is None


def test_an_old_transformers_is_one_line_naming_both_versions_and_the_fix():
    need = MINIMUM_VERSIONS["transformers"]
    problems = outdated(lambda name: "4.57.1" if name == "transformers" else "99.0")
    assert problems == [("transformers", "4.57.1", need)]
    line = message(problems)
    assert "\n" not in line
    assert "this environment has transformers 4.57.1" in line
    assert f"tested with transformers>={need}" in line
    assert line.endswith(f'fix: pip install "transformers>={need}"')


def test_several_old_or_missing_packages_are_still_one_line():
    old = {"transformers": "4.57.6", "tokenizers": "0.22.2"}
    line = message(outdated(lambda name: old.get(name, "99.0") if name != "safetensors" else None))
    assert "\n" not in line
    assert "transformers 4.57.6 and tokenizers 0.22.2 and no safetensors" in line
    fix = " ".join(
        f'"{n}>={MINIMUM_VERSIONS[n]}"' for n in ("transformers", "tokenizers", "safetensors")
    )
    assert line.endswith(f"fix: pip install {fix}")


def test_warn_if_outdated_warns_once_as_a_version_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _versions.warn_if_outdated(lambda name: "0.1")
    assert [str(w.message) for w in caught] == [line]
    assert issubclass(caught[0].category, VersionWarning)
    assert all(f"{name}>={need}" in line for name, need in MINIMUM_VERSIONS.items())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _versions.warn_if_outdated(lambda name: "99.0") is None
    assert caught == []


def test_import_course_lib_with_an_old_transformers_prints_one_line(tmp_path):
    """The real import, in a fresh interpreter whose metadata lookup reports transformers 4.57.1
    (nothing is installed or uninstalled): stderr is that one line, and the import succeeds."""
    need = MINIMUM_VERSIONS["transformers"]
    code = (
        "from importlib import metadata\n"
        "real = metadata.version\n"
        "metadata.version = lambda name: '4.57.1' if name == 'transformers' else real(name)\n"
        "import course_lib\n"
        "print(course_lib.BertConfig.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout == "BertConfig\n"
    assert done.stderr.splitlines() == [
        f"course_lib: this environment has transformers 4.57.1, but course_lib is tested with "
        f"transformers>={need} (parity and interop cells may fail); "
        f'fix: pip install "transformers>={need}"'
    ]
