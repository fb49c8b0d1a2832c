"""Iterators and snapshots: bounds, order, isolation from later writes,
use from other threads, and iterators left unfinished."""

import gc
import threading

import pytest

import turtlekv
from conftest import SMALL

KEYS = [b"a", b"ab", b"abc", b"b", b"ba", b"c", b"\xff", b"\xff\xff", b"\xff\xff\x01"]


@pytest.fixture
def filled(db):
    for k in KEYS:
        db[k] = k + b"!"
    return db


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"start": b"ab"},
        {"end": b"b"},
        {"start": b"ab", "end": b"ba"},
        {"start": b"b", "end": b"b"},
        {"start": b"c", "end": b"a"},
        {"prefix": b"a"},
        {"prefix": b"ab"},
        {"prefix": b"\xff"},
        {"prefix": b"\xff\xff"},
        {"prefix": b"z"},
        {"prefix": b"a", "start": b"abb"},
        {"prefix": b"a", "end": b"ab"},
        {"prefix": b"b", "start": b"a", "end": b"z"},
        {"prefix": b""},
    ],
)
@pytest.mark.parametrize("reverse", [False, True])
def test_bounds(filled, kwargs, reverse):
    start, end, prefix = kwargs.get("start"), kwargs.get("end"), kwargs.get("prefix")
    want = [
        k
        for k in sorted(KEYS)
        if (start is None or k >= start)
        and (end is None or k < end)
        and (prefix is None or k.startswith(prefix))
    ]
    if reverse:
        want.reverse()
    assert list(filled.keys(reverse=reverse, **kwargs)) == want
    assert list(filled.values(reverse=reverse, **kwargs)) == [k + b"!" for k in want]
    assert list(filled.items(reverse=reverse, **kwargs)) == [(k, k + b"!") for k in want]


def test_iter_is_keys(filled):
    assert list(filled) == sorted(KEYS)
    it = filled.items()
    assert iter(it) is it
    assert "items" in repr(it)


def test_keys_read_no_separated_value(db):
    big = {b"k%03d" % i: bytes([i]) * 5000 for i in range(40)}
    for k, v in big.items():
        db[k] = v
    db.checkpoint()
    before = db.stats()["value_reads"]
    assert list(db.keys()) == sorted(big)
    assert list(db.keys(reverse=True, prefix=b"k01")) == [b"k%03d" % i for i in range(19, 9, -1)]
    assert db.stats()["value_reads"] == before
    assert dict(db.items()) == big
    assert db.stats()["value_reads"] > before


def test_long_scan_crosses_memtable_and_tree(path):
    with turtlekv.open(path, **SMALL) as db:
        for i in range(0, 20000, 2):
            db[b"%08d" % i] = b"t"
        db.checkpoint()
        for i in range(1, 20000, 2):
            db[b"%08d" % i] = b"m"
        got = list(db.items())
        assert [k for k, _ in got] == [b"%08d" % i for i in range(20000)]
        assert list(db.keys(reverse=True))[:3] == [b"00019999", b"00019998", b"00019997"]


def test_iterator_reads_a_snapshot(db):
    for i in range(1000):
        db[b"%04d" % i] = b"old"
    it = db.items()
    first = next(it)
    for i in range(1000):
        db[b"%04d" % i] = b"new"
    db.delete_range(b"0500", b"0600")
    db[b"9999"] = b"late"
    rest = list(it)
    assert first == (b"0000", b"old")
    assert len(rest) == 999 and all(v == b"old" for _, v in rest)
    assert len(list(db.keys())) == 901


def test_snapshot(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    with db.snapshot() as snap:
        seq = snap.sequence
        db[b"a"] = b"changed"
        db[b"c"] = b"3"
        del db[b"b"]
        assert snap[b"a"] == b"1"
        assert snap.get(b"b") == b"2"
        assert snap.get(b"c", b"none") == b"none"
        assert b"b" in snap and b"c" not in snap
        with pytest.raises(KeyError):
            snap[b"c"]
        assert list(snap.items()) == [(b"a", b"1"), (b"b", b"2")]
        assert list(snap.keys(reverse=True)) == [b"b", b"a"]
        assert list(snap.values(prefix=b"a")) == [b"1"]
        assert list(snap) == [b"a", b"b"]
        assert snap.multi_get([b"a", b"c"]) == [b"1", None]
        assert snap.first_key_value() == (b"a", b"1")
        assert snap.last_key_value() == (b"b", b"2")
        assert snap.approximate_len() == 2
        assert snap.sequence == seq and "sequence" in repr(snap)
        it = snap.items()
    assert snap.closed and "closed" in repr(snap)
    with pytest.raises(turtlekv.ClosedError):
        snap[b"a"]
    # An iterator made from it reads on.
    assert list(it) == [(b"a", b"1"), (b"b", b"2")]


def test_snapshot_of_keyspaces(db):
    users = db.keyspace("users")
    users[b"u1"] = b"ann"
    db[b"x"] = b"default"
    snap = db.snapshot()
    users[b"u1"] = b"changed"
    users[b"u2"] = b"new"
    us = snap.keyspace(users)
    assert us[b"u1"] == b"ann" and b"u2" not in us
    assert list(us.items()) == [(b"u1", b"ann")]
    assert us.multi_get([b"u1", b"u2"]) == [b"ann", None]
    assert us.first_key_value() == (b"u1", b"ann") == us.last_key_value()
    assert us.sequence == snap.sequence
    with pytest.raises(NotImplementedError):
        us.approximate_len()
    assert snap[b"x"] == b"default"
    snap.close()
    assert us[b"u1"] == b"ann"  # a view has its own handle
    us.close()


def test_iterator_from_another_thread(db):
    for i in range(5000):
        db[b"%05d" % i] = b"v"
    it = db.keys()
    head = [next(it) for _ in range(10)]
    out = []
    t = threading.Thread(target=lambda: out.extend(it))
    t.start()
    t.join()
    assert head + out == [b"%05d" % i for i in range(5000)]


def test_one_iterator_shared_by_threads(db):
    n = 20000
    for i in range(n):
        db[b"%06d" % i] = b"v"
    it = db.keys()
    seen = [[] for _ in range(4)]

    def drain(mine):
        for k in it:
            mine.append(k)

    threads = [threading.Thread(target=drain, args=(s,)) for s in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Every key exactly once, each thread's share in order.
    assert sorted(k for s in seen for k in s) == [b"%06d" % i for i in range(n)]
    for s in seen:
        assert s == sorted(s)


def test_iterators_under_concurrent_writes(path):
    """Writers change every key while readers scan: each scan sees one
    consistent version (one writer round, given how keys are written)."""
    n = 2000
    with turtlekv.open(path, **SMALL) as db:
        batch = turtlekv.WriteBatch()
        for i in range(n):
            batch.put(b"%05d" % i, b"0")
        db.write(batch)
        stop = threading.Event()
        errors = []

        def writer():
            round_ = 0
            while not stop.is_set():
                round_ += 1
                batch = turtlekv.WriteBatch()
                for i in range(n):
                    batch.put(b"%05d" % i, b"%d" % round_)
                db.write(batch)

        def reader():
            try:
                for _ in range(15):
                    values = {v for v in db.values()}
                    keys = list(db.keys(reverse=True))
                    if len(values) != 1 or len(keys) != n:
                        errors.append((values, len(keys)))
            except Exception as e:  # reported below
                errors.append(e)

        writers = [threading.Thread(target=writer) for _ in range(2)]
        readers = [threading.Thread(target=reader) for _ in range(3)]
        for t in writers + readers:
            t.start()
        for t in readers:
            t.join()
        stop.set()
        for t in writers:
            t.join()
        assert errors == []
        assert len({v for v in db.values()}) == 1


def test_unfinished_iterators_do_not_block_reopen(path):
    db = turtlekv.open(path, **SMALL)
    for i in range(1000):
        db[b"%04d" % i] = b"v"
    its = [db.items(start=b"%04d" % i) for i in range(0, 1000, 10)]
    for it in its:
        next(it)
    gen = (k for k in db.keys())
    next(gen)
    db.close()
    with turtlekv.open(path, **SMALL) as again:
        assert len(list(again.keys())) == 1000
    # Iterators dropped without close let go of their snapshot.
    del its, gen
    gc.collect()


def test_exhausted_iterator_stays_exhausted(db):
    db[b"a"] = b"1"
    it = db.keys()
    assert list(it) == [b"a"]
    assert list(it) == []
    with pytest.raises(StopIteration):
        next(it)
