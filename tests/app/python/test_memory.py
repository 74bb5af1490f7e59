"""100 analyses in a loop do not grow memory: each analysis, its numpy views, its maps and its
figures are freed with the last Python reference to them."""

import gc

import ssaviz
from conftest import ENGLISH, JOBS, require


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_a_hundred_analyses_do_not_grow_memory():
    m = ssaviz.load(require(ENGLISH))
    words = JOBS.split()

    def one(k):
        # A different text each time (an edit in the middle), every kind of output touched once.
        text = " ".join(words[: 10 + k % 20] + [f"w{k}"] + words[10 + k % 20:])
        a = m.analyze(text, compare="vanilla" if k % 2 else "local")
        total = float(a.tau_q.sum() + a.metrics["entropy"].sum() + a.loss.sum())
        for layer in range(a.n_layer):
            total += float(a.attention(layer, k % a.n_head, "compare").sum())
        a.predictions(-1)
        if k % 10 == 0:
            a.highlight()._repr_png_()
        return total

    for k in range(20):  # warm-up: the allocator's pools and the engine's buffers reach their size
        one(k)
    gc.collect()
    before = rss_mb()
    for k in range(100):
        one(k)
    gc.collect()
    after = rss_mb()
    assert after - before < 25, f"memory grew from {before:.1f} MB to {after:.1f} MB over 100 analyses"
