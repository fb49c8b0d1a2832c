"""The GIL is released during calls that read or wait: another Python thread
keeps running while one is inside long engine calls."""

import sys
import threading
import time

import turtlekv
from conftest import SMALL


def spin(seconds, stop=None):
    """Pure-Python work: iterations done in `seconds` (or until `stop`)."""
    ticks, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end and not (stop and stop.is_set()):
        ticks += 1
    return ticks


def test_other_threads_run_during_long_calls(path):
    with turtlekv.open(path, **SMALL) as db:
        # `check()` reads and verifies every page: a long call once the
        # database holds some megabytes.
        n, call = 0, 0.0
        while call < 0.02:
            batch = turtlekv.WriteBatch()
            for i in range(n, n + 50000):
                batch.put(b"%08d" % i, b"v" * 100)
            db.write(batch)
            n += 50000
            db.checkpoint()
            started = time.perf_counter()
            db.check()
            call = time.perf_counter() - started
            assert n <= 800000, "check() stays too short to tell"

        old = sys.getswitchinterval()
        sys.setswitchinterval(0.001)
        try:
            alone = spin(0.3)
            stop = threading.Event()
            calls = []

            def checker():
                while not stop.is_set():
                    db.check()
                    calls.append(1)

            t = threading.Thread(target=checker)
            t.start()
            beside = spin(0.3)
            stop.set()
            t.join()
        finally:
            sys.setswitchinterval(old)
        assert len(calls) >= 3
        # Held through each call, the GIL would leave this thread only the
        # moments between calls (a few percent of the time); released, it
        # runs at nearly its own pace (less what the machine's other load
        # takes).
        assert beside > 0.3 * alone, (beside, alone, call)
