"""`python tests/strict_python.py SCRIPT ARGS...` runs SCRIPT as `python -W error SCRIPT
ARGS...` does, with one exception: a DeprecationWarning raised inside another library's own
code is that library's to fix, not a failure of ours. pyproject.toml's `filterwarnings` makes
the same exception for the suite itself.

The one such library today: orbax-checkpoint 0.12.8 (the newest) reads
`jax.sharding.SingleDeviceSharding`, which jax 0.12.1 deprecates. Warnings that our code or
the script itself triggers stay errors.
"""

import runpy
import sys
import warnings
from pathlib import Path

# Matched against the start of the module the warning is attributed to (`re.match`), which
# for a deprecated attribute is the module that read it.
OTHER_LIBRARIES = r"orbax\."


def main() -> None:
    warnings.simplefilter("error")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=OTHER_LIBRARIES)
    script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` sets it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
