"""The three stores the benchmark compares, behind one small interface:
batched load, point gets, a full scan and short range scans.

Each gets the same memory budget and the same durability (writes handed
to the operating system, not synced): TurtleKV's budget covers its
MemTables and caches (`cache_capacity_bytes`); RocksDB's block cache
gets half and its two write buffers a quarter each, since they are not
charged to its cache; LMDB has no cache of its own and reads through the
page cache, which the run's memory limit bounds."""

from __future__ import annotations

import itertools


class MappingStore:
    """What TurtleKV and rocksdict share: a dict-like `db` with `items()`,
    `get`, `write(batch)` and `close()`, and a module with `WriteBatch`."""

    def put(self, k, v):
        self.db[k] = v

    def load(self, pairs):
        batch = self.new_batch()
        for k, v in pairs:
            batch.put(k, v)
        self.db.write(batch)

    def new_batch(self):
        return self.mod.WriteBatch()

    def getter(self):
        return self.db.get

    def scan_all(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def close(self):
        self.db.close()


class TurtleKV(MappingStore):
    name = "turtlekv"

    def __init__(self, path, memory_bytes, direct_io):
        import turtlekv

        self.mod = turtlekv
        self.db = turtlekv.open(path, cache_capacity_bytes=memory_bytes, direct_io=direct_io)

    def scan(self, start, count):
        return sum(1 for _ in itertools.islice(self.db.items(start=start), count))

    def settle(self):
        self.db.checkpoint()

    def stats(self):
        s = self.db.stats()
        keep = ["write_amplification", "space_amplification", "leaf_fill", "disk_reads_per_get",
                "cache_hits", "cache_misses", "record_cache_hits", "record_cache_misses",
                "checkpoints", "write_stalls", "write_stall_nanos", "memtable_bytes",
                "cache_capacity_bytes", "record_cache_capacity_bytes", "page_read_ios",
                "page_bytes_read", "gets"]
        return {k: s[k] for k in keep}


class RocksDict(MappingStore):
    name = "rocksdict"

    def __init__(self, path, memory_bytes, direct_io):
        import rocksdict

        self.mod = rocksdict
        opts = rocksdict.Options(raw_mode=True)  # bytes as they are, no pickling
        opts.create_if_missing(True)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(memory_bytes // 2))
        opts.set_block_based_table_factory(table)
        opts.set_write_buffer_size(memory_bytes // 4)
        opts.set_max_write_buffer_number(2)
        opts.set_use_direct_reads(direct_io)
        opts.set_use_direct_io_for_flush_and_compaction(direct_io)
        self.db = rocksdict.Rdict(str(path), options=opts)

    def new_batch(self):
        return self.mod.WriteBatch(raw_mode=True)  # bytes as they are

    def scan(self, start, count):
        return sum(1 for _ in itertools.islice(self.db.items(from_key=start), count))

    def settle(self):
        self.db.flush()

    def stats(self):
        return {}


class Lmdb:
    """LMDB reads through the OS page cache (its file is mapped), so it has
    no cache size: the memory limit of the run is its cache."""

    name = "lmdb"

    def __init__(self, path, memory_bytes, direct_io):
        import lmdb

        self.env = lmdb.open(
            str(path),
            map_size=8 << 30,
            sync=False,  # as the others: handed to the OS, not synced
            metasync=False,
            readahead=False,  # random reads: read-ahead only evicts
        )
        self.txn = None

    def put(self, k, v):
        # A write transaction per record: what `db[k] = v` is elsewhere.
        with self.env.begin(write=True) as txn:
            txn.put(k, v)

    def load(self, pairs):
        with self.env.begin(write=True) as txn:
            for k, v in pairs:
                txn.put(k, v)

    def getter(self):
        # One read transaction for the whole phase, as a reader would hold.
        self.txn = self.env.begin(buffers=False)
        return self.txn.get

    def scan_all(self):
        n = 0
        with self.env.begin() as txn:
            for _ in txn.cursor():
                n += 1
        return n

    def scan(self, start, count):
        with self.env.begin() as txn:
            cur = txn.cursor()
            cur.set_range(start)
            return sum(1 for _ in itertools.islice(cur, count))

    def settle(self):
        self.env.sync(True)

    def stats(self):
        return {}

    def close(self):
        if self.txn is not None:
            self.txn.abort()
        self.env.close()


ENGINES = {e.name: e for e in (TurtleKV, RocksDict, Lmdb)}
