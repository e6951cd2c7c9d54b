"""Run one benchmark by name: ``./dev bench jobs|topics|dashboard [options]``."""

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
names = sorted(
    p.stem
    for p in HERE.glob("*.py")
    if p.stem not in {"run", "settings", "tasks", "common", "__init__"}
)
if len(sys.argv) < 2 or sys.argv[1] not in names:
    sys.exit(f"usage: ./dev bench NAME [options]; NAME is one of: {', '.join(names)}")
name = sys.argv.pop(1)
sys.argv[0] = str(HERE / f"{name}.py")
sys.path.insert(0, str(HERE.parent))
runpy.run_path(sys.argv[0], run_name="__main__")
