"""The lowest declared versions as exact pins, read from pyproject.toml's `>=` bounds.

    python tools/lower_bounds.py                      # transformers==..., tokenizers==..., safetensors==...
    python tools/lower_bounds.py torch transformers   # the pins of the packages named

`.ci/lower-bounds` installs these pins in a fresh environment and runs the parity, interop, export
and tokenizer tests, so the bounds pyproject declares are bounds CI has tested, never retyped.
The standard library only (tomllib, or tomli on Python 3.10), so it runs before any install.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
DEFAULT = ("transformers", "tokenizers", "safetensors")


def lower_bounds(text: str) -> dict[str, str]:
    """Each `name>=version` of pyproject's [project] dependencies, as {name: version}."""
    bounds = {}
    for requirement in tomllib.loads(text)["project"]["dependencies"]:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.+-]*)\s*", requirement)
        if match:
            bounds[match.group(1).lower()] = match.group(2)
    return bounds


def pins(text: str, names: tuple[str, ...] | list[str] = DEFAULT) -> list[str]:
    """`name==version` for each name, from its `>=` bound (KeyError naming it if it has none)."""
    bounds = lower_bounds(text)
    missing = [name for name in names if name.lower() not in bounds]
    if missing:
        raise KeyError(f"pyproject.toml declares no '>=' bound for {', '.join(missing)}")
    return [f"{name}=={bounds[name.lower()]}" for name in names]


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(DEFAULT)
    try:
        print("\n".join(pins(PYPROJECT.read_text(encoding="utf-8"), names)))
    except KeyError as err:
        print(f"lower_bounds: error: {err.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
