"""The cache benchmark's request law: seeded, and as skewed as a Zipf law is."""

from collections import Counter

from benchmarks.serve_cache import zipf_requests


def test_zipf_requests_are_seeded_and_favour_the_first_items() -> None:
    drawn = zipf_requests(5000, 100, 1.1)
    assert drawn == zipf_requests(5000, 100, 1.1) and drawn != zipf_requests(5000, 100, 1.1, seed=1)
    counts = Counter(drawn)
    assert set(counts) <= set(range(100))
    # Item 0 has weight 1, item 9 weight 10^-1.1 = 0.079: about 12.6 times as many draws.
    assert 8 < counts[0] / counts[9] < 20 and counts[0] > counts[1] > counts[50]
