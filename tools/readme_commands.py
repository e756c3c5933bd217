"""The README's numbered Quick start commands, one per line: what CI runs, in order.

    python tools/readme_commands.py          # prints command 1, then command 2

`.ci/run` runs exactly these lines on its fresh clone, so the commands a newcomer copies are the
commands CI tests: change the README and CI changes with it. A command is the first line that
follows a `# 1.`, `# 2.`, ... comment (and its continuation comments) in the first ```bash block
under "## Quick start"; the standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start_commands(text: str) -> list[str]:
    """The numbered commands of the Quick start block, in order (ValueError if there are none,
    or if their numbers do not run 1, 2, ...)."""
    section = text.split("\n## Quick start", 1)
    if len(section) < 2:
        raise ValueError("README.md has no '## Quick start' section")
    block = re.search(r"```bash\n(.*?)```", section[1], re.S)
    if block is None:
        raise ValueError("README.md's Quick start section has no ```bash block")
    commands, numbers, waiting = [], [], None
    for line in block.group(1).splitlines():
        numbered = re.match(r"#\s*(\d+)\.", line.strip())
        if numbered:
            waiting = int(numbered.group(1))
        elif line.strip() and not line.lstrip().startswith("#") and waiting is not None:
            commands.append(line.strip())
            numbers.append(waiting)
            waiting = None
    if not commands or numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"README.md's Quick start commands are numbered {numbers}, not 1, 2, ...")
    return commands


def main() -> int:
    try:
        commands = quick_start_commands(README.read_text(encoding="utf-8"))
    except ValueError as err:
        print(f"readme_commands: error: {err}", file=sys.stderr)
        return 2
    print("\n".join(commands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
