"""Common start-up for the atheris harnesses: put ``tests/`` on sys.path so ``reliability.targets`` imports."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
