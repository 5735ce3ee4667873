"""``python -m kafkalog``: the ``kafkalog`` command, for when the console script is not on PATH (a venv that is not
activated, ``pip install --user`` without ``~/.local/bin`` on PATH)."""

from kafkalog_cli.main import main

if __name__ == "__main__":
    main(prog_name="kafkalog")
