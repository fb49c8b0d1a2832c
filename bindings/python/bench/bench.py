"""Load, random reads and scans from Python: turtlekv against rocksdict
(RocksDB) and lmdb (LMDB), each in a process of its own, optionally in a
cgroup v1 memory group that bounds the whole process, page cache included
(needs root), so that the data set does not fit in memory.

    python bench.py --records 1000000 --value-bytes 200 --memory 128MiB \\
        --memory-limit 192MiB --dir /path/on/the/disk/to/test

Each engine runs --rounds times (3), interleaved with the others; the
table gives the median of each figure. Prints a table and, with --json,
writes every run's figures and the medians. docs/python.md has
the results and the setup."""

from __future__ import annotations

import argparse
import array
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from engines import ENGINES

UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")


def size(text: str) -> int:
    digits = text.rstrip("KMGiB")
    return int(digits) * UNITS[text[len(digits):]]


def key(i: int) -> bytes:
    return b"%016d" % i


def child(args) -> dict:
    if args.cgroup:
        # Joined first, so that everything this process maps, allocates or
        # reads into the page cache is charged to the group.
        Path(args.cgroup, "cgroup.procs").write_text(str(os.getpid()))
    rng = random.Random(args.seed)
    n = args.records
    order = array.array("I", range(n))
    rng.shuffle(order)
    engine = ENGINES[args.child](args.path, size(args.memory), not args.no_direct_io)
    out = {"engine": args.child}

    # Load, in random key order: the first half one put at a time, the
    # second in batches of 1,000. Values are made outside the timed calls.
    half = n // 2
    spent = 0.0
    for start in range(0, half, 1000):
        pairs = [(key(i), rng.randbytes(args.value_bytes)) for i in order[start : min(start + 1000, half)]]
        put = engine.put
        t = time.perf_counter()
        for k, v in pairs:
            put(k, v)
        spent += time.perf_counter() - t
    out["put_ops"] = half / spent
    spent = 0.0
    for start in range(half, n, 1000):
        pairs = [(key(i), rng.randbytes(args.value_bytes)) for i in order[start : start + 1000]]
        t = time.perf_counter()
        engine.load(pairs)
        spent += time.perf_counter() - t
    out["batch_ops"] = (n - half) / spent
    t = time.perf_counter()
    engine.settle()
    out["settle_s"] = time.perf_counter() - t
    out["after_load"] = engine.stats()
    del order

    # Random point reads of existing keys, uniform; a quarter as many
    # first, untimed, to warm the caches to their steady state.
    get = engine.getter()
    warm = [key(rng.randrange(n)) for _ in range(args.reads // 4)]
    for k in warm:
        get(k)
    keys = [key(rng.randrange(n)) for _ in range(args.reads)]
    t = time.perf_counter()
    found = 0
    for k in keys:
        if get(k) is not None:
            found += 1
    out["read_ops"] = args.reads / (time.perf_counter() - t)
    assert found == args.reads, (found, args.reads)
    out["after_reads"] = engine.stats()

    # Short scans: `scan_len` records from random starts.
    starts = [key(rng.randrange(n)) for _ in range(args.scans)]
    t = time.perf_counter()
    got = sum(engine.scan(s, args.scan_len) for s in starts)
    out["scan_ops"] = args.scans / (time.perf_counter() - t)
    out["scan_records"] = got

    # One scan of everything, in key order.
    t = time.perf_counter()
    total = engine.scan_all()
    out["full_scan_records_per_s"] = total / (time.perf_counter() - t)
    assert total == n, (total, n)

    engine.close()
    out["disk_bytes"] = sum(f.stat().st_size for f in Path(args.path).rglob("*") if f.is_file())
    # Peak resident memory (LMDB's mapped pages included); the cgroup's
    # peak would also count the page cache that writes fill.
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def own_memory_group() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return MEMORY_ROOT / path.lstrip("/")
    raise SystemExit("no cgroup v1 memory controller: run without --memory-limit")


def run(args) -> list[dict]:
    """Every engine `--rounds` times, the order rotated each round, so that
    a change in the shared machine's load hits every engine alike."""
    results = []
    root = Path(args.dir)
    names = args.engines.split(",")
    order = []
    for r in range(args.rounds):
        order += names[r % len(names) :] + names[: r % len(names)]
    for name in order:
        path = root / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        group = None
        if args.memory_limit != "none":
            group = own_memory_group() / f"turtlekv-py-bench-{os.getpid()}-{name}"
            group.mkdir()
            (group / "memory.limit_in_bytes").write_text(str(size(args.memory_limit)))
        cmd = [sys.executable, __file__, "--child", name, "--path", str(path)]
        cmd += ["--cgroup", str(group)] if group else []
        for opt in ["records", "value_bytes", "reads", "scans", "scan_len", "memory", "seed"]:
            cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
        cmd += ["--no-direct-io"] if args.no_direct_io else []
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        finally:
            if group:
                for _ in range(50):
                    try:
                        group.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
        if proc.returncode != 0:
            print(f"{name} failed ({proc.returncode}):\n{proc.stderr}", file=sys.stderr)
            results.append({"engine": name, "failed": proc.returncode})
        else:
            results.append(json.loads(proc.stdout.splitlines()[-1]))
            results[-1]["load_average"] = os.getloadavg()[0]
        print(json.dumps(results[-1]), file=sys.stderr)
        shutil.rmtree(path, ignore_errors=True)
    return results


def medians(results: list[dict]) -> list[dict]:
    """Per engine, the median of each figure over its rounds, and its
    range as `<field>_range`."""
    out = []
    for name in dict.fromkeys(r["engine"] for r in results):
        runs = [r for r in results if r["engine"] == name and "failed" not in r]
        if not runs:
            out.append({"engine": name, "failed": [r["failed"] for r in results if r["engine"] == name]})
            continue
        merged = {"engine": name, "rounds": len(runs)}
        for field, v in runs[0].items():
            if isinstance(v, (int, float)):
                values = sorted(r[field] for r in runs)
                merged[field] = values[len(values) // 2]
                merged[field + "_range"] = (values[0], values[-1])
        out.append(merged)
    return out


def table(results: list[dict]) -> str:
    cols = [
        ("put ops/s", "put_ops"),
        ("batch load ops/s", "batch_ops"),
        ("get ops/s", "read_ops"),
        ("scan(100) ops/s", "scan_ops"),
        ("full scan rec/s", "full_scan_records_per_s"),
        ("disk MiB", "disk_bytes"),
        ("peak RSS MiB", "peak_rss_bytes"),
    ]
    base = next((r for r in results if r["engine"] == "turtlekv" and "failed" not in r), None)
    lines = ["| engine | " + " | ".join(c for c, _ in cols) + " |"]
    lines.append("| --- |" + " ---: |" * len(cols))
    for r in results:
        if "failed" in r:
            lines.append(f"| {r['engine']} | failed ({r['failed']}) |")
            continue
        cells = []
        for _, field in cols:
            v = r.get(field)
            if v is None:
                cells.append("-")
            elif field.endswith("bytes"):
                cells.append(f"{v / (1 << 20):,.0f}")
            else:
                ratio = f" ({v / base[field]:.2f})" if base and r is not base else ""
                cells.append(f"{v:,.0f}{ratio}")
        lines.append(f"| {r['engine']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=200)
    p.add_argument("--reads", type=int, default=200_000)
    p.add_argument("--scans", type=int, default=2_000)
    p.add_argument("--scan-len", type=int, default=100)
    p.add_argument("--memory", default="128MiB", help="each engine's memory budget (engines.py says how it is split; LMDB has none)")
    p.add_argument("--memory-limit", default="192MiB", help="per process, page cache included; 'none' for no limit")
    p.add_argument("--no-direct-io", action="store_true", help="read TurtleKV and RocksDB through the page cache")
    p.add_argument("--engines", default="turtlekv,rocksdict,lmdb")
    p.add_argument("--dir", default="bench-data")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3, help="runs of each engine; the table gives medians")
    p.add_argument("--json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--cgroup", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    results = run(args)
    print(table(medians(results)))
    if args.json:
        meta = {k: v for k, v in vars(args).items() if k not in ("child", "path", "cgroup", "json")}
        meta["python"] = platform.python_version()
        meta["date"] = time.strftime("%Y-%m-%d")
        report = {"settings": meta, "medians": medians(results), "runs": results}
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
