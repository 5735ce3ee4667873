"""Package discovery only (metadata lives in pyproject.toml): the CLI's folder ``cli/`` installs as ``kafkalog_cli``."""

from setuptools import find_packages, setup

cli_packages = ["kafkalog_cli" + p[3:] for p in find_packages(include=["cli", "cli.*"])]
setup(
    packages=find_packages(include=["kafkalog", "kafkalog.*"]) + cli_packages,
    package_dir={"kafkalog_cli": "cli"},
)
