"""The mask stack's small-array statistics (occlusion.median0, percentile1) must equal numpy's
bit for bit: they replace np.median / np.percentile for speed only, and the masks (hence the
swap outputs) must not move by a single ulp."""
import numpy as np
import pytest

from swapline_core.masks.occlusion import median0, percentile1


def _same(expected, got) -> bool:
    e, g = np.asarray(expected), np.asarray(got)
    return e.dtype == g.dtype and np.array_equal(e, g, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_median_and_percentile_match_numpy_bit_for_bit(dtype):
    rng = np.random.default_rng(3)
    for it in range(1500):
        n = int(rng.integers(1, 400))
        a = (rng.normal(size=n) * 10.0 ** rng.integers(-3, 3)).astype(dtype)
        if it % 5 == 0:
            a = np.round(a, 1)                  # ties
        if it % 40 == 0 and n > 2:
            a[rng.integers(n)] = np.nan
        for q in (0, 5, 12.5, 50, 90, 95, 100):
            assert _same(np.percentile(a, q), percentile1(a.copy(), q)), (n, q)
        assert _same(np.median(a), median0(a)), n
        b = a[: (n // 3) * 3].reshape(-1, 3)
        if len(b):
            assert _same(np.median(b, axis=0), median0(b)), n
        grid = a[: (n // 4) * 4].reshape(4, -1)
        if grid.size:
            assert _same(np.percentile(grid, 95), percentile1(grid, 95)), n
