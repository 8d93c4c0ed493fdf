"""The diagnosis says what the evidence shows: a scale map's pattern and its likely cause (arena/diagnose/
scalemap.py), and a race when a second call on identical inputs differs (arena/diagnose/races.py).

Scale maps here are hand-computed from the copy's geometry (lane l of a 32-row atom reads atom row
(l / 8) * SBO / 16 + l % 8), not from the module's own formulas."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKEN = os.path.join(ROOT, "tests", "broken")
for path in (ROOT, BROKEN):
    if path not in sys.path:
        sys.path.append(path)

import reference  # noqa: E402
from arena import diagnose as D  # noqa: E402
from arena.diagnose.scalemap import explain_map  # noqa: E402
from arena.taskdef.nested import clone_data  # noqa: E402
from tests.evalrun import run_eval  # noqa: E402
from tests.test_diagnose import SQUARE, broken  # noqa: E402


def sbo_map(mn: int, seen: int, sbo: int):
    """(got_row, got_block) of a copy reading 8-row groups `sbo` bytes apart; -1 where it leaves the atom."""
    got_row = torch.full((mn, seen), -1, dtype=torch.long)
    got_block = torch.full((mn, seen), -1, dtype=torch.long)
    for r in range(mn):
        lane = r % 32
        atom_row = (lane // 8) * sbo // 16 + lane % 8
        if atom_row < 32:
            got_row[r] = r - lane + atom_row
            got_block[r] = torch.arange(seen)
    return got_row, got_block


@pytest.mark.parametrize("sbo, source", [(16, "row i+j's"), (0, "row j's"), (32, "row 2·i+j's"), (64, "row 4·i+j's")])
def test_a_scale_map_with_a_wrong_sbo_is_named_with_its_stride_and_the_descriptor_field(sbo, source):
    got_row, got_block = sbo_map(256, 32, sbo)
    pattern, cause = explain_map(got_row, got_block, "A", 256, 32)
    assert f"SFA row 8·i+j of every 32-row group (i = 0..3, j = 0..7) received {source} scale" in pattern
    assert f"row 8 got row {(sbo // 16)}'s" in pattern
    assert f"has SBO = {sbo} where the atom needs 128" in cause and "tcgen05.cp" in cause


def test_an_sbo_past_the_atom_says_rows_come_from_the_next_atom():
    got_row, got_block = sbo_map(256, 32, 256)       # lanes 16..31 leave the atom: unknown here
    pattern, cause = explain_map(got_row, got_block, "B", 256, 32)
    assert "received row 16·i+j's scale (past row 31 it reads the next 512-byte atom" in pattern
    assert "SBO = 256" in cause


def test_the_right_map_has_no_pattern_and_unknown_positions_contradict_nothing():
    got_row, got_block = sbo_map(256, 32, 128)
    assert explain_map(got_row, got_block, "A", 256, 32) is None
    got_row, got_block = sbo_map(256, 32, 16)
    got_row[::3], got_block[::3] = -1, -1            # a third of the rows undecodable
    assert "SBO = 16" in explain_map(got_row, got_block, "A", 256, 32)[1]


def test_a_row_shift_and_an_unexplained_map_are_described_as_such():
    rows = torch.arange(256).unsqueeze(1).expand(256, 32)
    blocks = torch.arange(32).unsqueeze(0).expand(256, 32)
    shifted = torch.where(rows + 3 < 256, rows + 3, torch.full_like(rows, -1))
    pattern, cause = explain_map(shifted, blocks, "A", 256, 32)
    assert pattern == "every SFA row r received row r+3's scale" and "offset by 3 rows" in cause
    scrambled = rows.clone()
    scrambled[5], scrambled[77] = 77, 5                # two rows exchanged: no rule fits
    pattern, cause = explain_map(scrambled, blocks, "A", 256, 32)
    assert cause == "" and "(5, 0) got (77, 0)" in pattern
    one_off = rows.clone()
    one_off[8] = 1                                     # SBO 16 would also move rows 9..31: it must not fit
    assert "SBO" not in explain_map(one_off, blocks, "A", 256, 32)[1]


def test_a_wrapped_probe_code_still_names_the_sbo():
    """Past 250 (row tile, K-block) codes the probe's decoding wraps; the rule is compared as decoded."""
    mn, sk, wrap = 512, 112, 250
    got_row, got_block = sbo_map(mn, sk, 16)
    code = ((got_row // 128) * sk + got_block) % wrap
    known = got_row >= 0
    got_row = torch.where(known, (code // sk) * 128 + got_row % 128, got_row)
    got_block = torch.where(known, code % sk, got_block)
    assert "SBO = 16" in explain_map(got_row, got_block, "A", mn, sk, wrap)[1]


def test_the_scale_map_probe_ends_with_the_pattern_and_its_cause():
    """The probe `diagnose` runs: its headline (the diagnosis line of `eval.py diagnose`) names the rule."""
    kernel = broken("layout_sbo_16")
    probe = D.probes.probe_scale_map(lambda data: kernel.custom_kernel(clone_data(data)), "A", 256, 256, 512, 1, "cpu")
    assert not probe.ok
    assert probe.headline.startswith("2048 of 8192 (row, K-block) positions received their own scale; SFA row 8·i+j")
    assert probe.headline.endswith("has SBO = 16 where the atom needs 128 (8 rows x 16 bytes)")
    assert any("changed output rows [33, 40]" in line for line in probe.lines), probe.lines


def test_test_names_a_wrong_scale_copy_stride_as_a_classic_bug():
    kernel = broken("layout_sbo_16")
    data = reference.generate_input(**SQUARE)
    out = kernel.custom_kernel(clone_data(data))
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**SQUARE))
    assert found.hypothesis == "sbo_16", found.summary
    assert "SBO = 16" in found.summary and "SBO = 128 bytes" in found.summary


# ---- a second call on identical inputs ------------------------------------------------------------------

def explain(name, rerun=None, args=SQUARE, regenerate=True):
    kernel = broken(name)
    data = reference.generate_input(**args)
    out = kernel.custom_kernel(clone_data(data))
    again = rerun or (lambda d: kernel.custom_kernel(clone_data(d)))
    return D.explain_failure(reference, data, out, (lambda: reference.generate_input(**args)) if regenerate else None,
                             rerun=again)


def test_a_race_is_named_when_a_second_call_differs():
    """race_fixup: one tile from a half-finished accumulator, a different tile each call. One output alone
    reads as 'the last K tile missing'; the second call shows the race."""
    found = explain("race_fixup")
    assert found.hypothesis == "race"
    assert found.summary.startswith("The output differs between two calls on identical inputs: a race (")
    assert "tcgen05.wait::ld" in found.summary and "\n" not in found.summary
    assert any(line.startswith("differing tiles: batch 0, rows ") for line in found.evidence), found.evidence


def test_a_deterministic_bug_is_not_a_race_and_says_the_second_call_agreed():
    found = explain("last_ktile_missing")
    assert found.hypothesis == "k_missing_384_512"
    assert "a second call on identical inputs gave the same bits (no race seen)" in found.evidence


def test_differences_within_the_tolerance_are_not_a_race():
    kernel = broken("last_ktile_missing")

    def jitter(data):                                 # partial sums added in another order: last-bit changes
        out = kernel.custom_kernel(clone_data(data))
        bits = out.view(torch.int16)
        bits[::7] ^= 1
        return out
    found = explain("last_ktile_missing", rerun=jitter)
    assert found.hypothesis == "k_missing_384_512"
    assert any("differs only within the tolerance" in line for line in found.evidence)


def test_a_second_call_that_fails_leaves_the_first_diagnosis():
    def crash(data):
        raise RuntimeError("worker died\nmore")
    found = explain("last_ktile_missing", rerun=crash)
    assert found.hypothesis == "k_missing_384_512"
    assert "a second call on identical inputs failed: RuntimeError: worker died" in found.evidence


def test_the_second_call_gets_the_pristine_inputs_not_the_checked_ones():
    """The check may leave the reference's result in the parent's c: a kernel that leaves tiles unwritten
    would then differ between calls. The second call gets regenerated inputs (checked identical), and
    without them there is no second call."""
    args = dict(m=128, n=384, k=256, l=1, seed=6)
    kernel = broken("tail_unwritten")
    data = reference.generate_input(**args)
    out = kernel.custom_kernel(clone_data(data))
    data[6].copy_(reference.ref_kernel(clone_data(data)))          # what a check writing into c leaves
    seen = []

    def rerun(inputs):
        seen.append(inputs)
        return kernel.custom_kernel(clone_data(inputs))
    found = D.explain_failure(reference, data, out, lambda: reference.generate_input(**args), rerun=rerun)
    assert found.hypothesis == "unwritten_tiles", found.summary
    pristine = reference.generate_input(**args)
    assert len(seen) == 1 and all(torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a, b.view(torch.uint8)
                                              if b.dtype.itemsize == 1 else b) for a, b in zip(seen[0], pristine))
    seen.clear()
    D.explain_failure(reference, data, out, None, rerun=rerun)
    assert seen == []


def test_eval_test_names_the_race_through_the_worker(tmp_path):
    spec = tmp_path / "spec.txt"
    spec.write_text("m: 256; n: 256; k: 512; l: 1; seed: 3\n")
    run = run_eval("test", str(spec), "--submission", os.path.join(BROKEN, "race_fixup.py"), json_report=True)
    assert run.code == 112, run.stderr[-2000:]
    case = run.doc["cases"][0]
    assert case["diagnosis"].startswith("The output differs between two calls on identical inputs: a race"), case
    assert "last K tile" not in case["diagnosis"]
