"""The oldest releases course_lib is tested with, and a one-line warning at `import course_lib`
when the environment has an older one (or none).

`MINIMUM_VERSIONS` is the one place in the code for these numbers: pyproject.toml's `>=` bounds
and environment.yml say the same (tests/test_versions.py), and CI installs exactly these versions
in a second environment and runs the parity, interop, export and tokenizer tests with them.

A warning, not an ImportError: most lessons (tokenizers, models built from parts, pretraining,
the labs) never touch `transformers`, so an older one must not stop them; the cells that compare
with `transformers` would fail obscurely, and the warning names the cause and the fix before they
run. Silence it before the import like any warning:
`warnings.filterwarnings("ignore", message="course_lib: this environment")`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from importlib import metadata

# transformers, tokenizers, safetensors: the lowest releases the parity, interop, export and
# tokenizer tests pass with (found by installing older ones: README, "Tested versions"). torch: the
# release CI tests with, the oldest CPU-only build CI's machines can install.
MINIMUM_VERSIONS: dict[str, str] = {
    "torch": "2.13.0",
    "transformers": "5.17.0",
    "tokenizers": "0.23.1",
    "safetensors": "0.8.0",
}


class VersionWarning(UserWarning):
    """An installed package is older than the release course_lib is tested with."""


def release(version: str) -> tuple[int, ...]:
    """The numeric release part of a version string: "2.13.0+cpu" -> (2, 13, 0), "5.0.0rc1" ->
    (5, 0, 0). Enough to compare against a minimum without depending on `packaging`."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if match is None:
        return ()
    parts = [int(part) for part in match.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 5.0 == 5.0.0
        parts.pop()
    return tuple(parts)


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None where it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def outdated(
    lookup: Callable[[str], str | None] = installed_version,
    minimums: dict[str, str] = MINIMUM_VERSIONS,
) -> list[tuple[str, str | None, str]]:
    """(name, installed version or None, needed version) for each package that is missing or
    older than its minimum; [] when everything is recent enough."""
    found = [(name, lookup(name), needed) for name, needed in minimums.items()]
    return [
        (n, have, need) for n, have, need in found if have is None or release(have) < release(need)
    ]


def message(problems: list[tuple[str, str | None, str]]) -> str | None:
    """The one line a learner reads: what is installed, what is needed, and the pip command that
    fixes it (None when there is no problem)."""
    if not problems:
        return None
    needed = " and ".join(f"{name}>={need}" for name, _, need in problems)
    have = " and ".join(
        f"no {name}" if version is None else f"{name} {version}" for name, version, _ in problems
    )
    fix = " ".join(f'"{name}>={need}"' for name, _, need in problems)
    return (
        f"course_lib: this environment has {have}, but course_lib is tested with {needed} "
        f"(parity and interop cells may fail); fix: pip install {fix}"
    )


def _one_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """Format the warning as its message alone (no file, no source line): one line to read."""
    return f"{message}\n"


def warn_if_outdated(lookup: Callable[[str], str | None] = installed_version) -> str | None:
    """Warn (VersionWarning, shown as one line) when a package is missing or older than its
    minimum; returns that line, or None when the environment is recent enough."""
    line = message(outdated(lookup))
    if line is None:
        return None
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line
    try:
        warnings.warn(line, VersionWarning, stacklevel=2)
    finally:
        warnings.formatwarning = previous
    return line
