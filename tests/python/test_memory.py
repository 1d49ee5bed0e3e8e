"""No memory growth over 100 generate calls (and forwards): the resident set after them stays within a small margin
of the one after a warm-up."""

import gc
import os


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_growth_over_100_generate_calls(llama):
    def calls():
        llama.generate("The capital of France is", max_new_tokens=8, eos_token_id=[], return_dict=True)
        llama.generate([[1, 5, 9, 200]], max_new_tokens=8, eos_token_id=[], streamer=lambda text, token: None)
        llama([1, 5, 9, 200])

    for _ in range(20):  # warm-up: allocator pools, thread pool, caches
        calls()
    gc.collect()
    before = rss_bytes()
    for _ in range(100):
        calls()
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 4 << 20, f"resident memory grew by {grown} bytes over 100 calls"
