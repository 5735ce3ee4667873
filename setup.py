"""Package discovery (metadata lives in pyproject.toml): the CLI's folder ``cli/`` installs as ``kafkalog_cli``, and
the optional C extensions ``kafkalog.records._columns`` (the columnar record decoder's hot loop) and
``kafkalog.cleaner._cleaner`` (the log cleaner's offset map and per-record loops).

The extensions are ``optional``: without a C compiler the install goes on and kafkalog uses its pure-Python decoder
and cleaner (``KAFKALOG_NO_EXTENSIONS=1`` forces that path at run time too); :class:`BuildExtSayingWhatIsMissing`
says so in one paragraph, and ``kafkalog --version`` / ``kafkalog doctor`` say it again after the install.
"""

import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

#: the record decoder inflates gzip members itself when zlib's headers are there (else Python's zlib module does)
ZLIB = ("KAFKALOG_HAVE_ZLIB", "1")
#: and decodes zstd frames itself with libzstd when its headers are there (else through the zstandard package)
ZSTD = ("KAFKALOG_HAVE_ZSTD", "1")
#: each optional codec library: its macro and the library linked, dropped in this order while the build fails
CODEC_LIBS = ((ZSTD, "zstd"), (ZLIB, "z"))

#: said once, after the build, when an optional extension could not be compiled
NOT_BUILT = """
kafkalog: {names} could not be compiled ({reason}).
kafkalog works without {them}, but its record decoder and log cleaner then run in pure Python, many times
slower. To build {them}: install a C compiler and Python's headers (Debian: apt-get install gcc python3-dev),
then reinstall kafkalog. `kafkalog doctor` shows what is in use.
"""


class BuildExtSayingWhatIsMissing(build_ext):
    """setuptools skips a failed ``optional`` extension with a warning lost among the build lines (and pip hides
    it); this names what was skipped, what it costs and how to get it, once, after the last extension."""

    def run(self) -> None:
        self._skipped: list[tuple[str, str]] = []
        super().run()
        if self._skipped:
            names = " and ".join(name for name, _ in self._skipped)
            them = "them" if len(self._skipped) > 1 else "it"
            sys.stderr.write(NOT_BUILT.format(names=names, reason=self._skipped[0][1], them=them))

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - setuptools' compiler errors have no common base worth naming
            for macro, lib in CODEC_LIBS:  # no headers (libzstd-dev, zlib1g-dev): that codec goes through Python
                if macro in ext.define_macros:
                    ext.define_macros.remove(macro)
                    ext.libraries.remove(lib)
                    self.build_extension(ext)
                    return
            if not ext.optional:
                raise
            self._skipped.append((ext.name, f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:200]))

cli_packages = ["kafkalog_cli" + p[3:] for p in find_packages(include=["cli", "cli.*"])]
setup(
    cmdclass={"build_ext": BuildExtSayingWhatIsMissing},
    packages=find_packages(include=["kafkalog", "kafkalog.*"]) + cli_packages,
    package_dir={"kafkalog_cli": "cli"},
    # imported by PySpark's data-source lookup worker (it imports every top-level pyspark_* module); see its docstring
    py_modules=["pyspark_kafkalog"],
    ext_modules=[
        Extension(
            "kafkalog.records._columns",
            ["kafkalog/records/_columns.c"],
            define_macros=[ZLIB, ZSTD],
            libraries=["z", "zstd"],
            depends=[f"kafkalog/records/_columns_{h}.h" for h in ("mem", "crc", "crc_core", "crc_x86", "crc_arm", "wire", "codec", "snappy", "arrow", "objects", "offsets", "walk", "records")],
            optional=True,
        ),
        Extension(
            "kafkalog.cleaner._cleaner",
            ["kafkalog/cleaner/_cleaner.c"],
            define_macros=[ZLIB],
            libraries=["z"],
            depends=[f"kafkalog/cleaner/_{h}.h" for h in ("md5", "cleaner_encode", "cleaner_write")]
            + [f"kafkalog/records/_columns_{h}.h" for h in ("crc", "crc_core", "crc_x86", "crc_arm")],
            optional=True,
        ),
    ],
)
