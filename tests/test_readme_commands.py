"""CI runs the README's Quick start commands as written (tools/readme_commands.py reads them):
the two a newcomer copies, in order, and nothing else."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("readme_commands", ROOT / "tools/readme_commands.py")
readme_commands = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_commands)


def test_the_readme_has_the_two_commands_ci_runs():
    one, two = readme_commands.quick_start_commands((ROOT / "README.md").read_text())
    assert one.startswith("python -m pip install") and one.endswith("&& course pretrain")
    assert two.startswith("python -m pip install") and two.endswith("&& python -m pytest")
    assert '".[dev]"' in two


def test_ci_runs_the_readme_commands_in_order_and_copies_none():
    code = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "#" not in line[:1]]
    assert any("python3 tools/readme_commands.py" in line for line in code)
    copied = [line for line in code if "pytest" in line or "course pretrain" in line]
    assert copied == [], "CI must run the README's commands, not its own copy of them"
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools/readme_commands.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == readme_commands.quick_start_commands(
        (ROOT / "README.md").read_text()
    )


QUICK = "# T\n\n## Quick start\n\n```bash\n{}\n```\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        ("# 1. install\n#    and run\npip install x && run\n\n# 2. test\npytest", None),
        ("# 2. out of order\nb\n# 1. first\na", "numbered [2, 1]"),
        ("just a line\n", "numbered []"),
    ],
)
def test_commands_are_the_lines_after_their_numbers(body, expected):
    if expected is None:
        assert readme_commands.quick_start_commands(QUICK.format(body)) == [
            "pip install x && run",
            "pytest",
        ]
    else:
        with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]")):
            readme_commands.quick_start_commands(QUICK.format(body))


def test_a_readme_without_the_section_is_one_clear_error():
    with pytest.raises(ValueError, match="no '## Quick start' section"):
        readme_commands.quick_start_commands("# T\n\nno commands here\n")
