// CUTLASS's SM100 block-scaled scale-factor layout on the host (tests/test_blackwell_emulation.py): prints, per line
// "<mn> <k> <l>" on stdin, the offsets that Sm1xxBlkScaledConfig<16>::tile_atom_to_shape_SFA gives to scale
// (row, K-block, batch) for every row < mn, K-block < k / 16 and batch < l, row-major, on one line. Host code only.
#include <cstdio>
#include <cute/tensor.hpp>
#include <cutlass/detail/sm100_blockscaled_layout.hpp>

int main() {
  using Config = cutlass::detail::Sm1xxBlockScaledConfig<16>;
  int mn, k, l;
  while (std::scanf("%d %d %d", &mn, &k, &l) == 3) {
    auto layout = Config::tile_atom_to_shape_SFA(cute::make_shape(mn, 1, k, l));
    for (int b = 0; b < l; ++b)
      for (int r = 0; r < mn; ++r)
        for (int c = 0; c < k / 16; ++c)
          std::printf("%d ", (int)layout(r, c * 16, b));
    std::printf("\n");
  }
  return 0;
}
