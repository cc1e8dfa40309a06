"""The README's deployment blocks as the tests run them: one section's first ```bash block, a
command a line, trailing ``  # comments`` cut (the S3 and HDFS set-ups are tested as written)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(heading: str) -> list[str]:
    text = README.read_text()
    section = text[text.index(heading):]
    code = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in code.splitlines() if line.strip()]
