"""Package discovery (metadata lives in pyproject.toml): the CLI's folder ``cli/`` installs as ``kafkalog_cli``, and
the optional C extensions ``kafkalog.records._columns`` (the columnar record decoder's hot loop) and
``kafkalog.cleaner._cleaner`` (the log cleaner's offset map and per-record loops).

The extensions are ``optional``: without a C compiler the build warns and the install goes on; kafkalog then uses
the pure-Python decoder (``KAFKALOG_NO_EXTENSIONS=1`` forces that path at run time too).
"""

from setuptools import Extension, find_packages, setup

cli_packages = ["kafkalog_cli" + p[3:] for p in find_packages(include=["cli", "cli.*"])]
setup(
    packages=find_packages(include=["kafkalog", "kafkalog.*"]) + cli_packages,
    package_dir={"kafkalog_cli": "cli"},
    # imported by PySpark's data-source lookup worker (it imports every top-level pyspark_* module); see its docstring
    py_modules=["pyspark_kafkalog"],
    ext_modules=[
        Extension(
            "kafkalog.records._columns",
            ["kafkalog/records/_columns.c"],
            depends=[f"kafkalog/records/_columns_{h}.h" for h in ("mem", "crc", "crc_core", "crc_x86", "crc_arm", "wire", "codec", "arrow", "objects", "offsets", "walk")],
            optional=True,
        ),
        Extension(
            "kafkalog.cleaner._cleaner",
            ["kafkalog/cleaner/_cleaner.c"],
            depends=[f"kafkalog/cleaner/_{h}.h" for h in ("md5", "cleaner_encode", "cleaner_write")]
            + [f"kafkalog/records/_columns_{h}.h" for h in ("crc", "crc_core", "crc_x86", "crc_arm")],
            optional=True,
        ),
    ],
)
