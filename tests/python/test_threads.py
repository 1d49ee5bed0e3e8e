"""The GIL is released while ferry computes, calls on one model from several threads give what they give alone, and
Ctrl-C (SIGINT) stops a long generation with KeyboardInterrupt."""

import os
import signal
import sys
import threading
import time

import ferry

PROMPTS = [[1, 5, 9, 200], [1, 77, 3], [1, 42, 42, 42, 8], [1, 300, 12]]


def test_threads_get_what_they_get_alone(llama):
    alone = [llama.generate([p], max_new_tokens=10).tolist() for p in PROMPTS]
    logits_alone = [llama(p) for p in PROMPTS]
    results, errors = {}, []

    def work(i):
        try:
            for _ in range(3):
                results[i] = llama.generate([PROMPTS[i]], max_new_tokens=10).tolist()
                assert (llama(PROMPTS[i]) == logits_alone[i]).all()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [results[i] for i in range(len(PROMPTS))] == alone


def test_gil_is_released_during_generate_and_forward(llama):
    # Counting ticks against a fixed number would depend on the machine's speed and load, and with the default 5 ms
    # switch interval a held GIL still lets the ticker in just before and after the call (tens of thousands of ticks).
    # So nobody is ever forced to give the GIL up (an interval of 1000 s) and the ticker gives it up after each tick:
    # it can then run only while ferry has released the GIL. Holding it through a call gives exactly 0 ticks during
    # the call, releasing it gives ticks for as long as ferry computes, however fast or busy the machine.
    ticks = [0]
    done = threading.Event()

    def ticker():  # pure Python: it can only run while nobody holds the GIL
        while not done.is_set():
            ticks[0] += 1
            time.sleep(1e-4)  # lets go of the GIL

    t = threading.Thread(target=ticker)
    t.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        time.sleep(0.05)  # the ticker's waits begun under the old interval run out
        for call in (lambda: llama.generate([[1, 2, 3]], max_new_tokens=1500, eos_token_id=[]),
                     lambda: llama(list(range(1, 300)) * 8)):  # one forward of 2392 tokens: no callback at all
            start, t0 = ticks[0], time.monotonic()
            call()
            elapsed, during = time.monotonic() - t0, ticks[0] - start
            assert during > 0, f"the ticker never ran in {elapsed:.3f} s of ferry computing: the GIL was held"
    finally:
        sys.setswitchinterval(interval)
        done.set()
        t.join()


def test_ctrl_c_interrupts_generate(llama):
    # A model whose context is 2^20 tokens, asked for 10^6 tokens: only the interrupt can end this in time. Python's
    # own Ctrl-C handler for the test's duration: a process started in the background by a non-interactive shell
    # inherits SIGINT ignored, and then Python installs none (the test then generated for ever).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        llama.generate([[1, 2, 3]], max_new_tokens=1_000_000, eos_token_id=[])
        raise AssertionError("generate was not interrupted")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 30
    assert llama.generate([[1, 2, 3]], max_new_tokens=3).shape[1] >= 4  # the model still works
