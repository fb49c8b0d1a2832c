"""The GIL is released during calls that read or wait: another Python thread
runs while one is inside a long engine call."""

import sys
import threading
import time

import turtlekv
from conftest import SMALL


def test_other_threads_run_during_a_long_call(path):
    with turtlekv.open(path, **SMALL) as db:
        batch = turtlekv.WriteBatch()
        for i in range(60000):
            batch.put(b"%08d" % i, b"v" * 64)
        db.write(batch)
        db.checkpoint()
        # `check()` reads and verifies every page: one long call.
        started = time.perf_counter()
        db.check()
        call = time.perf_counter() - started
        assert call > 0.02, "the call is too short to tell"

        old = sys.getswitchinterval()
        sys.setswitchinterval(0.001)
        try:
            inside = threading.Event()
            done = threading.Event()

            def long_call():
                inside.set()
                db.check()
                done.set()

            t = threading.Thread(target=long_call)
            t.start()
            inside.wait()
            # Count this thread's iterations while the other is inside.
            ticks, longest, last = 0, 0.0, time.perf_counter()
            while not done.is_set():
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now
                ticks += 1
            t.join()
        finally:
            sys.setswitchinterval(old)
        # Held through the call, the GIL would stop this loop for all of it.
        assert ticks > 1000
        assert longest < call / 2, (longest, call)
