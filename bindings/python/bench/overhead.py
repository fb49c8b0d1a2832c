"""The binding's own cost per `get`, in cache: the same keys looked up on
the same open database by a Python loop (`db.get(k)`) and by the engine's
`Db::get` in a Rust loop (`turtlekv._turtlekv._rust_get_loop`, which calls
it on the handle the Python object wraps). The difference is what the
binding adds: argument conversion, releasing and retaking the GIL, the
result's `bytes`, and the Python loop and call themselves.

    python overhead.py [--records 200000] [--gets 1000000]"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import turtlekv
from turtlekv._turtlekv import _rust_get_loop


def best(fn, rounds):
    """The fastest of `rounds` runs of `fn`, in seconds: the run least
    disturbed by the machine's other load."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--gets", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as d, turtlekv.open(d, cache_capacity_bytes="1GiB") as db:
        batch = turtlekv.WriteBatch()
        for i in range(args.records):
            batch.put(b"%016d" % i, rng.randbytes(args.value_bytes))
        db.write(batch)
        db.checkpoint()  # reads go to the tree's cached pages, as most do
        keys = [b"%016d" % rng.randrange(args.records) for _ in range(args.gets)]
        n = len(keys)

        def rust():
            nanos, found = _rust_get_loop(db, keys)
            assert found == n

        def python_get():
            get = db.get
            for k in keys:
                get(k)

        def python_getitem():
            for k in keys:
                db[k]

        empty = {}.get

        def python_dict_get():
            for k in keys:
                empty(k)

        # Warm every cache (pages, records) to its steady state, then
        # time the variants in turns, so that a change in the machine's
        # load or the caches' state hits them alike; keep each one's best.
        for _ in range(3):
            rust()

        def rust_timed():
            return _rust_get_loop(db, keys)[0] / 1e9

        variants = {
            "Rust loop of Db::get": rust_timed,
            "Python loop of db.get(k)": lambda: best(python_get, 1),
            "Python loop of db[k]": lambda: best(python_getitem, 1),
            "Python loop of {}.get(k) (the loop and a C call)": lambda: best(python_dict_get, 1),
        }
        results = {name: float("inf") for name in variants}
        for _ in range(args.rounds):
            for name, run in variants.items():
                results[name] = min(results[name], run())
        rust_s = results["Rust loop of Db::get"]
        print(f"{args.records:,} records of {args.value_bytes} bytes, {n:,} random gets, best of {args.rounds} turns")
        print("| loop | ns per get | above the Rust loop |")
        print("| --- | ---: | ---: |")
        for name, s in results.items():
            per = s / n * 1e9
            print(f"| {name} | {per:,.0f} | {per - rust_s / n * 1e9:+,.0f} |")


if __name__ == "__main__":
    main()
