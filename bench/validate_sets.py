"""`python bench/validate_sets.py [FILE...]`: the validator the spec names (../shared/spec/schema-b2.en.md:
"`bench/validate_sets.py` rejects any violation").

A thin entry over the one validator, bench.annotations.validate: it runs the `bench validate`
command itself (bench/cli_validate.py), so the checks, the table of failures, the messages,
the options (`--manifest`) and the exit codes (1 on any failure) are the same. Run from the
project folder, as a file or as `python -m bench.validate_sets`; with no FILE it validates
bench/sets/*.jsonl and the local data sets' set.jsonl.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    # run as a file: Python put bench/ first on the path, where io.py and numbers.py would shadow the standard
    # library's; the project folder goes there instead, so `bench` is this checkout's package
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from bench.cli_validate import validate_command


def main(argv: list[str] | None = None) -> None:
    validate_command.main(args=argv, prog_name="bench/validate_sets.py")


if __name__ == "__main__":
    main()
