"""arena/diagnose/: each classic bug in tests/broken/ gets its diagnosis, honest submissions stay quiet.

Unit tests call the diagnostics directly on tensors (fast); a few end-to-end runs of eval.py as a real
subprocess check that the diagnosis reaches the human and JSON reports and never the POPCORN lines.
"""
import json
import os
import sys
import tempfile

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKEN = os.path.join(ROOT, "tests", "broken")
for path in (ROOT, BROKEN):
    if path not in sys.path:
        sys.path.append(path)

import reference  # noqa: E402
from arena import diagnose as D  # noqa: E402
from arena.nvfp4.layouts import to_permuted  # noqa: E402
from arena.taskdef.nested import clone_data  # noqa: E402
from tests.evalrun import run_eval
from tests.fileload import load_file

SQUARE = dict(m=256, n=256, k=512, l=1, seed=3)


def load(path: str):
    return load_file(path, "sub_" + os.path.basename(path)[:-3])


def broken(name: str):
    return load(os.path.join(BROKEN, name + ".py"))


def run_case(module, args):
    data = reference.generate_input(**args)
    out = module.custom_kernel(clone_data(data))
    good, _ = reference.check_implementation(data, out)
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**args))
    return good, found


# ---- every classic bug is named -----------------------------------------------------------------------

FIRES = [
    ("nibble_swap_a", SQUARE, "nibble_swap", "ONE operand"),
    ("scales_ignored", SQUARE, "scales_ignored", "scales ignored"),
    ("scales_exchanged", SQUARE, "scales_exchanged", "SFA and SFB exchanged"),
    ("layout_rows_plain", SQUARE, "rows_plain", "32-row and 4-row-group roles swapped"),
    ("layout_to_blocked_no_transpose", SQUARE, "to_blocked_no_transpose",
     "to_blocked without its .transpose(1, 2): row r of each 128-row block received row 4·(r % 32) + r / 32's"),
    ("layout_rowblock_wrapped", SQUARE, "rowblock_stride_zero", "the row-block index dropped from the offset"),
    ("layout_rowblock_stride", SQUARE, "rowblock_stride_scales",
     "row block 0 reads its scales right, every later one reads another block's tiles or past the buffer"),
    ("layout_inner_transposed", SQUARE, "inner_transposed", "4-row-group and K-position indices swapped"),
    ("layout_kgroup_swapped", SQUARE, "kgroup_swapped", "position inside the group swapped"),
    ("layout_ktile_stride", SQUARE, "ktile_stride", "wrong stride between K tiles"),
    ("layout_tile_order", SQUARE, "tile_order", "K-tile-major"),
    ("layout_k_atom_stride_zero", SQUARE, "k_atom_stride_zero", "stride of 0 on the atom's K mode"),
    ("layout_permuted_contiguous", SQUARE, "permuted_contiguous", ".contiguous()"),
    ("layout_plain_as_blocked", SQUARE, "plain_as_blocked", "plain [MN, K/16] scales read as if"),
    ("layout_blocked_as_plain", SQUARE, "blocked_as_plain", "read as if they were plain"),
    ("layout_view_k_order", SQUARE, "view_rm_r4_r32__c4_kt", "K as (position in K tile (k%4), K tile (k/4))"),
    ("layout_view_rows_order", SQUARE, "view_r32_r4_rm__kt_c4", "rows as (row in group (r%32)"),
    ("layout_rows_plain_last_tile", dict(m=384, n=256, k=512, l=1, seed=7), "rows_plain_partial",
     "but only for the last row tile (rows 256-383) of A and the last row tile (rows 128-255) of B"),
    ("last_ktile_missing", SQUARE, "k_missing_384_512", "last K tile missing"),
    ("only_last_ktile", dict(m=128, n=256, k=1024, l=1, seed=4), "only_last_256", "only the last K tile"),
    ("transposed", SQUARE, "transposed", "transposed"),
    ("wrong_batch", dict(m=128, n=256, k=256, l=2, seed=5), "batch_0", "batch 1 holding the result of batch 0"),
    ("fp16_accumulate", SQUARE, "low_precision_fp16", "fp16 accumulator"),
    ("tail_unwritten", dict(m=128, n=384, k=256, l=1, seed=6), "unwritten_tiles", "columns 256-383"),
    ("zeros", SQUARE, "all_zero", "all zeros"),
    ("untouched", SQUARE, "untouched", "pre-filled c"),
]


@pytest.mark.slow          # one evaluation per planted bug: `pytest -m slow`
@pytest.mark.parametrize("name,args,key,phrase", FIRES, ids=[f[0] for f in FIRES])
def test_each_broken_submission_gets_its_diagnosis(name, args, key, phrase):
    good, found = run_case(broken(name), args)
    assert not good
    assert found is not None and found.hypothesis == key, (found.hypothesis, found.summary)
    assert phrase in found.summary
    assert found.evidence and "\n" not in found.summary


def test_layout_bugs_on_one_operand_name_that_operand():
    data = reference.generate_input(**SQUARE)
    kernel = broken("honest_blocked")
    a, b, sfa, sfb, pa, pb, c = clone_data(data)
    # SFA read with the rows_plain bug, SFB right: rebuild sfa_permuted so that a correct read gives that.
    wrong = D.misread_scales("rows_plain", sfa, pa, 0, torch.float32, 0.0).to(torch.float8_e4m3fn).unsqueeze(-1)
    out = kernel.custom_kernel((a, b, sfa, sfb, to_permuted(wrong), pb, c))
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**SQUARE))
    assert found.hypothesis == "rows_plain_a", found.summary
    assert "for SFA only" in found.summary


def test_a_nibble_swap_in_part_of_one_operand_names_the_rows():
    args = dict(m=384, n=256, k=512, l=1, seed=8)
    data = reference.generate_input(**args)
    a, b, sfa, sfb, pa, pb, c = clone_data(data)
    raw = a.view(torch.uint8)
    raw[256:] = (raw[256:] >> 4) | (raw[256:] << 4)       # the last row tile of A swapped, as a tail path might
    out = reference.ref_kernel((a, b, sfa, sfb, pa, pb, c))
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**args))
    assert found.hypothesis == "nibble_swap_partial", found.summary
    assert "but only for the last row tile (rows 256-383) of A" in found.summary
    assert "in the last row tile (rows 256-383)" in " ".join(found.evidence) or "rows 256-383" in " ".join(found.evidence)


# ---- honest submissions stay quiet --------------------------------------------------------------------

@pytest.mark.parametrize("path", [os.path.join(BROKEN, "honest_blocked.py"), os.path.join(BROKEN, "nibble_swap_both.py"),
                                  os.path.join(BROKEN, "honest_view.py"),
                                  os.path.join(ROOT, "submissions", "torch_reference.py")])
@pytest.mark.parametrize("args", [SQUARE, dict(m=384, n=128, k=768, l=2, seed=9)])
def test_honest_submissions_pass_and_get_no_diagnosis(path, args):
    good, found = run_case(load(path), args)
    assert good and found is None


def test_an_isolated_wrong_value_gets_anatomy_but_no_invented_bug():
    data = reference.generate_input(**SQUARE)
    out = reference.ref_kernel(clone_data(data)).clone()
    out[1, 2, 0] += 64
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**SQUARE))
    assert found.hypothesis is None
    assert found.summary.startswith("1 of 65536 elements are wrong (in rows 1; columns 2")
    assert "no classic bug explains it" in found.summary


def test_garbage_output_is_not_blamed_on_a_classic_bug():
    data = reference.generate_input(**SQUARE)
    out = (torch.randn(256, 256, 1) * 1000).half()
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**SQUARE))
    assert found.hypothesis is None and "no classic bug" in found.summary


def test_a_correct_output_has_no_diagnosis():
    data = reference.generate_input(**SQUARE)
    expected = reference.ref_kernel(clone_data(data))
    assert D.diagnose(data, expected.clone(), expected) is None


# ---- anatomy -----------------------------------------------------------------------------------------

def test_index_patterns_name_stripes_groups_and_tails():
    every_32nd = torch.zeros(512, dtype=torch.bool)
    every_32nd[5::32] = True
    assert D.index_pattern(every_32nd, "row") == "only every 32nd row (row % 32 == 5)"
    group = torch.zeros(384, dtype=torch.bool)
    for t in range(3):
        group[128 * t + 64: 128 * t + 96] = True
    assert D.index_pattern(group, "row").startswith("only rows 64-95 of every 128-row tile")
    tail = torch.zeros(384, dtype=torch.bool)
    tail[256:] = True
    assert D.index_pattern(tail, "column") == "only the last column tile (columns 256-383)"
    ragged = torch.zeros(300, dtype=torch.bool)
    ragged[256:] = True
    assert "irregular tail" in D.index_pattern(ragged, "row")
    one = torch.zeros(512, dtype=torch.bool)
    one[128:256] = True
    assert D.index_pattern(one, "column") == "only column tile 1 (columns 128-255)"


def test_anatomy_counts_nonfinite_values_and_maps_tiles():
    expected = torch.ones(256, 384, 1, dtype=torch.float16)
    out = expected.clone()
    out[0:128, 256:384] = 5             # one tile wrong
    out[200, 10] = float("nan")
    out[201, 11] = float("-inf")
    an = D.anatomy(out, expected)
    assert (an.mismatches, an.nan, an.neginf, an.posinf) == (128 * 128 + 2, 1, 1, 0)
    grid = [line.strip() for line in an.map_lines[1:]]
    assert grid == ["..#", "!.."]


def test_anatomy_sees_partially_untouched_output():
    prefilled = torch.randn(256, 256, 1).half()
    expected = torch.randn(256, 256, 1).half()
    out = expected.clone()
    out[128:, 128:] = prefilled[128:, 128:]
    found = D.diagnose(("not", "a", "gemm"), out, expected, prefilled)
    assert found.hypothesis == "unwritten_tiles"
    assert any(line.strip() == ".u" for line in found.evidence)


def test_chance_equalities_with_the_prefilled_output_are_not_called_unwritten():
    """Every element wrong with values of the pre-filled output's own distribution (bf16 randn): a few equal the
    pre-filled value by chance. They are evidence of nothing: no "still hold the pre-filled c", no 'u' tile."""
    gen = torch.Generator().manual_seed(7)
    prefilled = torch.randn(64, 512, 1, generator=gen).bfloat16()
    expected = (torch.randn(64, 512, 1, generator=gen) * 4).bfloat16()
    out = torch.randn(64, 512, 1, generator=gen).bfloat16()
    assert int((out == prefilled).sum()) > out.numel() // 1000       # the premise: chance equalities above the line
    an = D.anatomy(out, expected, prefilled)
    assert not an.untouched, an.untouched
    assert not any("pre-filled" in line for line in an.lines()), an.lines()
    assert not any("u" in line.split(":")[-1] for line in an.map_lines[1:]), an.map_lines


def test_other_tasks_get_anatomy_only():
    expected = torch.randn(128, 1, 2).half()
    out = expected.clone()
    out[::32] += 1
    found = D.diagnose(("gemv-like", "data"), out, expected)
    assert found.hypothesis is None
    assert not any("hypotheses scored" in line for line in found.evidence)
    assert "row % 32 == 0" in found.summary and "no classic bug" not in found.summary
    assert "(bug hypotheses and probes exist for the nvfp4_gemm contract only)" in found.evidence


def test_a_failing_diagnosis_is_one_line_and_never_raises():
    class BadReference:
        @staticmethod
        def ref_kernel(data):
            raise ValueError("reference exploded\nsecond line")

    data = reference.generate_input(**SQUARE)
    found = D.explain_failure(BadReference, data, torch.zeros(256, 256, 1).half())
    assert found.summary == "(no diagnosis: the diagnostics failed: ValueError: reference exploded)"


# ---- the layout models agree with a kernel-shaped reader ---------------------------------------------

@pytest.mark.parametrize("kind", list(D.LAYOUT_BUGS))
def test_misread_scales_equal_what_a_kernel_reading_memory_gets(kind):
    kernel = broken("_kernel")
    data = reference.generate_input(m=384, n=256, k=768, l=2, seed=11)
    for plain, perm in ((data[2], data[4]), (data[3], data[5])):
        for batch in range(2):
            model = D.misread_scales(kind, plain, perm, batch, torch.float64, 0.0)
            read = kernel.scales(plain, perm, batch, torch.float64, kind)
            assert torch.equal(model, read), (kind, batch)


# ---- probes (called directly, no worker) -------------------------------------------------------------

def probes(name):
    module = broken(name) if not name.endswith(".py") else load(name)
    return {p.name.split(" (")[0]: p for p in
            D.run_probes(lambda data: module.custom_kernel(clone_data(data)), reference, dict(D.DEFAULT_PROBE_CASE), "cpu")}


def test_probes_pass_for_an_honest_kernel():
    results = probes("honest_blocked")
    assert set(results) == {"all ones", "nibble order", "SFA map", "SFB map", "random case", "repeat"}
    assert all(p.ok for p in results.values())


def test_scale_map_probe_shows_the_applied_mapping_and_names_the_layout_bug():
    results = probes("layout_rows_plain")
    assert results["all ones"].ok and results["nibble order"].ok
    for operand in ("SFA map", "SFB map"):
        p = results[operand]
        assert not p.ok and "32-row and 4-row-group roles swapped" in p.headline
        assert any("(1, 0)" in line and "(32, 0)" in line and "WRONG" in line for line in p.lines)
        assert any("= 2 (all else 1) changed output" in line and "[5]" in line and "33 only" in line
                   for line in p.lines), p.lines
    honest = probes("honest_blocked")["SFA map"]
    assert any("changed output rows [33] in every columns" in line for line in honest.lines), honest.lines


def test_nibble_probe_and_ignored_scales_probe():
    assert "exactly one operand takes the HIGH nibble" in probes("nibble_swap_a")["nibble order"].headline
    ignored = probes("scales_ignored")
    assert "SFA is not applied" in ignored["SFA map"].headline
    assert "SFB is not applied" in ignored["SFB map"].headline


# ---- end to end: eval.py as a real subprocess ---------------------------------------------------------

def eval_py(*args, popcorn=False):
    run = run_eval(*args, popcorn=popcorn)
    return run.code, run.stdout, run.stderr, run.raw


@pytest.fixture(scope="module")
def square_spec():
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("m: 256; n: 256; k: 512; l: 1; seed: 3\n")
    return f.name


def test_eval_test_report_and_json_carry_the_diagnosis(square_spec, tmp_path):
    out = tmp_path / "r.json"
    code, stdout, stderr, _ = eval_py("test", square_spec, "--submission", os.path.join(BROKEN, "nibble_swap_a.py"),
                                      "--json", str(out))
    assert code == 112, stderr
    assert "diagnosis:" in stdout and "ONE operand" in stdout
    case = json.loads(out.read_text())["cases"][0]
    assert "ONE operand" in case["diagnosis"] and case["evidence"]


def test_popcorn_lines_stay_official(square_spec):
    code, _, stderr, raw = eval_py("test", square_spec, "--submission", os.path.join(BROKEN, "nibble_swap_a.py"),
                                   popcorn=True)
    assert code == 112, stderr
    keys = [line.split(":")[0] for line in raw.splitlines()]
    assert keys == ["test-count", "test.0.spec", "test.0.status", "test.0.error", "check"]
    assert "Number of mismatched elements" in raw and "diagnos" not in raw.lower() and "nibble" not in raw


def test_benchmark_correctness_failure_is_diagnosed(square_spec):
    code, stdout, stderr, _ = eval_py("benchmark", square_spec, "--submission",
                                      os.path.join(BROKEN, "layout_tile_order.py"))
    assert code == 112, stderr
    assert "failed the correctness check before timing" in stdout
    assert "diagnosis:" in stdout and "K-tile-major" in stdout


def test_diagnose_mode_prints_the_scale_mapping():
    code, stdout, stderr, _ = eval_py("diagnose", "--submission", os.path.join(BROKEN, "layout_kgroup_swapped.py"))
    assert code == 112, stderr
    assert "SFA map" in stdout and "SFB map" in stdout
    assert "the mapping is exactly that of the K tile (group of 4 scales)" in stdout
    assert "layout bugs with exactly this mapping: kgroup_swapped" in stdout
    assert "structured probes exist for the nvfp4_gemm contract only" not in " ".join(stdout.split())
    assert "kernel applied scale of" in stdout


@pytest.mark.slow          # diagnose runs every test case of an honest submission first
def test_diagnose_mode_passes_an_honest_submission_and_refuses_popcorn():
    code, stdout, stderr, _ = eval_py("diagnose", "--submission", os.path.join(ROOT, "submissions", "torch_reference.py"))
    assert code == 0, stderr + stdout
    assert "6 of 6 probes passed" in stdout
    code, _, stderr, _ = eval_py("diagnose", "--submission", os.path.join(ROOT, "submissions", "torch_reference.py"),
                                 popcorn=True)
    assert code == 2 and "no POPCORN_FD protocol" in stderr


def test_diagnose_mode_on_another_task_gives_the_anatomy_only():
    code, stdout, stderr, _ = eval_py("diagnose", "--task", os.path.join(ROOT, "tasks", "nvfp4_gemv"),
                                      "--submission", os.path.join(BROKEN, "gemv_row_stripe.py"))
    assert code == 112, stderr + stdout
    text = " ".join(stdout.split())
    assert "structured GEMM probes exist for the nvfp4_gemm contract only" in text
    assert "diagnosis: 4 of 128 elements are wrong (in every 32nd row (row % 32 == 0); max abs error 8)." in text


def test_generated_readers_cover_the_hand_listed_layout_bugs_and_start_from_the_true_layout():
    """The generator (arena/diagnose/readers.py) reproduces the correct blocked offsets with its default
    reader, and among its misreadings are the hand-listed ones it can express (all but a wrong K-tile stride)."""
    from arena.diagnose import readers
    from arena.diagnose.hypotheses import _blocked_offsets
    mn, sk = 384, 40
    rows = torch.arange(mn)
    assert torch.equal(readers.Reader("right", "").offsets(rows, sk, mn), _blocked_offsets(mn, sk, "cpu"))
    generated = [r.offsets(rows, sk, mn) for r in readers.all_readers()]
    for kind in ("rows_plain", "inner_transposed", "kgroup_swapped", "tile_order"):
        assert any(torch.equal(g, _blocked_offsets(mn, sk, "cpu", kind)) for g in generated), kind
    assert not any(torch.equal(g, _blocked_offsets(mn, sk, "cpu", "ktile_stride")) for g in generated)


@pytest.mark.slow          # three calls at a size that shows the race: `pytest -m slow`
def test_a_race_is_named_by_the_repeat_probe_and_put_first():
    """Identical inputs, different bits from call to call: the repeat probe names a race and the tiles."""
    repeat = probes("race_fixup")["repeat"]
    assert not repeat.ok and "on identical inputs differ" in repeat.headline and "a race" in repeat.headline
    assert repeat.lines and repeat.lines[0].startswith("differing tiles: batch 0, rows ")
    code, stdout, stderr, _ = eval_py("diagnose", "--submission", os.path.join(BROKEN, "race_fixup.py"))
    assert code == 112, stderr
    text = " ".join(stdout.split())
    assert "diagnosis: repeat (3 calls, identical inputs): call 1 and call" in text, text[-1500:]


@pytest.mark.gpu
def test_a_kernel_built_for_another_gpu_is_named_not_reported_as_an_untouched_output():
    """A raw <<<>>> launch of a kernel built for sm_100a only, on a GPU that is not sm_100: the launch fails
    silently and c keeps its values; the run names the missing kernel image instead of a wrong result."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] == 10:
        pytest.skip("needs a GPU that is not sm_100")
    run = run_eval("test", "--submission", os.path.join(BROKEN, "wrong_arch_kernel.py"), json_report=True, timeout=600)
    assert run.code == 112, run.stderr[-2000:]
    first = run.doc["cases"][0]
    assert "no kernel image for this GPU" in first["error"], first["error"]
    assert "unchanged" not in first["error"]


def test_the_repeat_probe_names_a_change_of_dtype_in_one_line():
    outputs = iter([torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.float32),
                    torch.zeros(4, dtype=torch.float16)])
    found = D.probes.probe_repeat(lambda data: next(outputs), lambda: (torch.ones(1),))
    assert not found.ok and "\n" not in found.headline
    assert "returned (4,) torch.float16, then (4,) torch.float32" in found.headline


def test_diagnose_shows_what_the_probed_calls_printed(tmp_path):
    """An emulated kernel's lint warnings arrive on its stderr during the probes: diagnose must show them."""
    source = tmp_path / "printing.py"
    source.write_text("import sys\nfrom submissions.torch_reference import custom_kernel as honest\n\n\n"
                      "def custom_kernel(data):\n    print('emulated tcgen05 warning: a lint line', file=sys.stderr)\n"
                      "    return honest(data).zero_()\n")
    spec = tmp_path / "one.txt"
    spec.write_text("m: 128; n: 256; k: 256; l: 1; seed: 1111\n")
    run = run_eval("diagnose", str(spec), "--submission", str(source))
    assert run.code == 112 and "emulated tcgen05 warning: a lint line" in run.stdout, run.stdout[-2000:]
