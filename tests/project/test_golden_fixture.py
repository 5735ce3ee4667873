from tests.conftest import GOLDEN, golden_cases, needs_golden


@needs_golden
def test_golden_cases_are_found():
    cases = golden_cases()
    assert "golden-none-0" in cases
    assert (GOLDEN / "manifests" / "golden-none-0.json").is_file()


@needs_golden
def test_golden_copy_is_independent(golden_copy):
    copy = golden_copy("logdir/golden-none-0")
    (copy / "scratch").write_text("x")
    assert not (GOLDEN / "logdir" / "golden-none-0" / "scratch").exists()
