"""What a newcomer meets: ``python -m kafkalog``, an install without a C compiler saying so (at the build, in
``--version`` and ``kafkalog doctor``), a docstring on every public name, a package docstring that points at nothing
missing, and README's account of which tests skip where and why."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from functools import cached_property
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

import kafkalog
from tests.conftest import REPO_ROOT

#: a child that cannot import the two compiled extensions, as after an install without a C compiler
_WITHOUT_EXTENSIONS = textwrap.dedent(
    """
    import sys

    class NoCompiler:
        def find_spec(self, name, path=None, target=None):
            if name in ("kafkalog.records._columns", "kafkalog.cleaner._cleaner"):
                raise ImportError(f"{name} was not built")
            return None

    sys.meta_path.insert(0, NoCompiler())
    from kafkalog_cli.main import main
    main(sys.argv[1:], prog_name="kafkalog")
    """
)


def _child(*args: str, env: dict[str, str] | None = None, code: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "kafkalog", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_python_dash_m_kafkalog_runs_the_cli() -> None:
    result = _child("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"kafkalog, version {kafkalog.__version__}"
    help_text = _child("--help").stdout
    assert help_text.startswith("Usage: kafkalog ") and "doctor" in help_text


def test_version_and_doctor_say_when_the_compiled_parts_are_missing() -> None:
    """The pure-Python fallback is silent at run time; --version says it in one line, doctor per part, exit 0."""
    version = _child("--version", code=_WITHOUT_EXTENSIONS)
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[0] == f"kafkalog, version {kafkalog.__version__}" and len(lines) == 2
    assert "compiled record decoder and compiled log cleaner: NOT BUILT" in lines[1]
    assert "many times slower" in lines[1] and "C compiler" in lines[1]

    doctor = _child("doctor", "--json", code=_WITHOUT_EXTENSIONS)
    assert doctor.returncode == 0, doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    for name in ("compiled record decoder (kafkalog.records._columns)", "compiled log cleaner (kafkalog.cleaner._cleaner)"):
        assert not checks[name]["ok"] and checks[name]["detail"].startswith("not built")
    assert checks["CRC32C"]["detail"].startswith("crc32c package")
    assert not checks["codecs in C"]["ok"] and checks["codecs in C"]["detail"].startswith("none")
    assert {"kafkalog", "Java", "Kafka oracle", "fiu-utils", "pyspark"} <= set(checks)


def test_doctor_reports_this_install() -> None:
    """In-process: every line has its mark; the extensions' lines agree with what is loaded; fiu-run and Java as
    ``shutil.which`` finds them; switched off by KAFKALOG_NO_EXTENSIONS is said as such."""
    from kafkalog.records import native

    result = CliRunner().invoke(main, ["doctor"], catch_exceptions=False)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(line[:3] in ("ok ", "-- ") for line in lines) and len(lines) == 9
    decoder = next(line for line in lines if "kafkalog.records._columns" in line)
    assert decoder.startswith("ok ") == native.available()
    codecs = next(line for line in lines if " codecs in C: " in line)
    if native.available():
        assert ("zstd with libzstd " in codecs) == bool(native.compiled.zstd_in_c)
        assert ("gzip with zlib" in codecs) == bool(native.compiled.gzip_in_c)
        assert codecs.startswith("ok ") == bool(native.compiled.zstd_in_c and native.compiled.gzip_in_c)
    crc = next(line for line in lines if " CRC32C: " in line)
    if native.available():
        assert f"path {native.compiled.crc_path()} " in crc and f"record walk path {native.compiled.walk_path()} " in crc
    fiu = next(line for line in lines if " fiu-utils: " in line)
    assert fiu.startswith("ok ") == (shutil.which("fiu-run") is not None)

    off = _child("--version", env={"KAFKALOG_NO_EXTENSIONS": "1"})
    if native.compiled is not None:
        assert "switched off by KAFKALOG_NO_EXTENSIONS" in off.stdout


def test_a_build_without_a_compiler_says_what_it_skipped(tmp_path: Path) -> None:
    """``setup.py build_ext`` with a compiler that always fails: the build succeeds and ends with one paragraph
    naming both extensions, the cost, and the fix."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO_ROOT / name, src / name)
    skip = shutil.ignore_patterns("*.so", "__pycache__", "*.pyc")
    for name in ("kafkalog", "cli"):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=skip)
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=src, env={**os.environ, "CC": "false", "LDSHARED": "false"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    said = build.stderr
    assert said.count("kafkalog: kafkalog.records._columns and kafkalog.cleaner._cleaner could not be compiled") == 1
    assert "many times" in said and "install a C compiler" in said and "kafkalog doctor" in said


def test_a_build_without_libzstd_headers_decodes_zstd_through_zstandard(tmp_path: Path) -> None:
    """``setup.py build_ext`` where ``zstd.h`` does not compile (as without libzstd-dev): the record decoder is
    still built, with zlib, without libzstd; it decodes zstd batches through the zstandard package, the same
    columns as the pure-Python decoder, and doctor names the package to install."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "kafkalog", src / "kafkalog", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    headers = tmp_path / "include"
    headers.mkdir()
    (headers / "zstd.h").write_text("#error no libzstd here\n")
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--build-temp", str(tmp_path / "tmp")],
        cwd=src, env={**os.environ, "CFLAGS": f"-I{headers} -O0"}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    child = textwrap.dedent(
        """
        import json, sys
        from kafkalog.records import CompressionType, build_batch, read_record_columns
        from kafkalog.records.native import compiled
        from kafkalog.records import codec_contexts
        from kafkalog_cli.doctor import checks
        batch = build_batch([(b"k%d" % i, b"v" * i, []) for i in range(50)], base_offset=7,
                            compression=CompressionType.ZSTD)
        a = read_record_columns(batch, implementation="compiled")
        b = read_record_columns(batch, implementation="python")
        codecs = next(c for c in checks() if c.name == "codecs in C")
        print(json.dumps([compiled.__file__, compiled.zstd_in_c, compiled.gzip_in_c, callable(codec_contexts.zstd_decoder()),
                          a.to_arrow().equals(b.to_arrow()), len(a), codecs.ok, codecs.detail]))
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO_ROOT}"}
    ran = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    where, zstd_c, gzip_c, calls_zstandard, same, n, ok, detail = json.loads(ran.stdout)
    assert where.startswith(str(src)) and zstd_c == 0 and gzip_c == 1 and calls_zstandard
    assert same and n == 50
    assert not ok and "zstd through the zstandard package" in detail and "libzstd-dev" in detail


# --- docstrings ----------------------------------------------------------------------------------------------------


def _public_members(cls: type) -> dict[str, object]:
    """Public methods and properties of ``cls`` and of the kafkalog classes it inherits from."""
    found: dict[str, object] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("kafkalog"):
            continue
        for name, obj in vars(klass).items():
            if name.startswith("_") or name in found:
                continue
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
            if isinstance(obj, (property, cached_property)) or inspect.isfunction(obj):
                found[name] = obj
    return found


def undocumented_public_names() -> tuple[int, list[str]]:
    """(names checked, those without a docstring) over ``kafkalog.__all__``: each function and class, every public
    method and property of each class, and each exception class of ``kafkalog.errors``."""
    checked, missing = 0, []
    for export in kafkalog.__all__:
        obj = getattr(kafkalog, export)
        if inspect.ismodule(obj):
            items = [(n, o) for n, o in vars(obj).items()
                     if not n.startswith("_") and inspect.isclass(o) and o.__module__ == obj.__name__]
        else:
            items = [(export, obj)]
        for name, item in items:
            checked += 1
            inherited = inspect.isclass(item) and item.__doc__ == getattr(item.__mro__[1], "__doc__", None)
            if not (item.__doc__ or "").strip() or inherited:
                missing.append(name)
            if inspect.isclass(item):
                for member, value in _public_members(item).items():
                    checked += 1
                    if not (getattr(value, "__doc__", None) or "").strip():
                        missing.append(f"{name}.{member}")
    return checked, missing


def test_every_public_name_has_a_docstring() -> None:
    checked, missing = undocumented_public_names()
    assert checked > 300
    assert missing == [], f"{len(missing)} of {checked} public names have no docstring: {', '.join(missing)}"


def test_the_package_docstring_points_at_nothing_missing() -> None:
    """An installed package has no ``../shared`` or ``docs/``: whatever file the docstring names must ship."""
    doc = kafkalog.__doc__ or ""
    package = Path(kafkalog.__file__).parent
    for name in re.findall(r"[\w./-]+\.(?:md|txt|rst|json)\b", doc):
        assert (package / name).is_file(), f"kafkalog's docstring names {name}, which is not in the package"
    assert "shared/" not in doc and "python -m kafkalog" in doc


# --- README's skip list --------------------------------------------------------------------------------------------


def test_readme_names_every_reason_tests_skip_for() -> None:
    """Each condition a test skips on outside the project's control is in README's list, with the tests it skips."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = " ".join(readme.split("Which tests skip, and why", 1)[1].split("\n## ", 1)[0].split())
    for needed in ("fiu-utils", "AVX-512", "javac", "root", "namespaces", "C compiler", "Java", "golden",
                   "pyspark", "test_manager_fiu.py", "test_crash_fiu_soak.py", "test_record_columns_crc.py",
                   "test_metadata_schemas.py", "test_kafka_lock.py", "test_spark_cluster.py"):
        assert needed in section, needed
    assert "4 tests skip" not in readme
