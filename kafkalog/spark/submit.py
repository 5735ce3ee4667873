"""``spark-submit`` entry point of the validation job (spark-submit runs a file, not a module).

    spark-submit --master spark://HOST:7077 \
      --py-files "$(python -m kafkalog.spark.submit --zip)" \
      "$(python -m kafkalog.spark.submit --path)" ROOT... --out DIR_OR_URL [--storage-option KEY=VALUE ...]

``--zip`` builds a zip of the installed kafkalog package and prints its path (executors import kafkalog from it);
``--path`` prints this file's path. Run by spark-submit, the file takes :func:`kafkalog.spark.validate.main`'s
arguments; the master and the rest of the configuration come from spark-submit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["entry_point", "main"]


def entry_point() -> str:
    """This file's path: the application spark-submit runs."""
    return os.path.abspath(__file__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--path"]:
        print(entry_point())
        return 0
    if args == ["--zip"]:
        from kafkalog.spark.session import package_zip

        print(package_zip())
        return 0
    from kafkalog.spark.validate import main as validate_main

    # no --master: get_session(None) asks the JVM spark-submit started for its spark.master
    return validate_main(args)


if __name__ == "__main__":
    sys.exit(main())
