"""Transactions: reads, buffered writes, commit, conflicts, keyspaces."""

import threading

import pytest

import turtlekv


def test_reads_see_own_writes_and_start(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    txn = db.transaction()
    db[b"a"] = b"outside"  # after the start: invisible to txn
    assert txn[b"a"] == b"1"
    txn[b"c"] = b"3"
    txn.put(b"d", bytearray(b"4"))
    del txn[b"b"]
    txn.delete(b"nothing")
    assert txn.get(b"c") == b"3" and txn.get(b"b") is None
    assert txn.get(b"zz", b"dflt") == b"dflt"
    assert b"c" in txn and b"b" not in txn
    with pytest.raises(KeyError):
        txn[b"b"]
    assert list(txn.items()) == [(b"a", b"1"), (b"c", b"3"), (b"d", b"4")]
    assert list(txn.keys(start=b"b")) == [b"c", b"d"]
    assert list(txn.values(prefix=b"d")) == [b"4"]
    assert list(txn) == [b"a", b"c", b"d"]
    assert b"c" not in db  # buffered until commit
    assert txn.sequence > 0 and "sequence" in repr(txn)
    txn.rollback()
    assert txn.finished and "finished" in repr(txn)
    assert b"c" not in db


def test_commit_and_conflict(db):
    db[b"n"] = b"0"
    t1 = db.transaction()
    t2 = db.transaction()
    t1[b"n"] = b"%d" % (int(t1[b"n"]) + 1)
    t2[b"n"] = b"%d" % (int(t2[b"n"]) + 1)
    t1.commit(sync=True)
    with pytest.raises(turtlekv.ConflictError):
        t2.commit()
    assert db[b"n"] == b"1"
    assert t1.finished and t2.finished
    with pytest.raises(turtlekv.ClosedError):
        t1.commit()
    with pytest.raises(turtlekv.ClosedError):
        t1[b"x"] = b"y"
    with pytest.raises(turtlekv.ClosedError):
        t1.get(b"n")


def test_range_read_conflicts(db):
    txn = db.transaction()
    assert list(txn.keys(prefix=b"user:")) == []
    db[b"user:1"] = b"phantom"
    txn[b"count"] = b"0"
    with pytest.raises(turtlekv.ConflictError):
        txn.commit()


def test_context_manager(db):
    with db.transaction() as txn:
        txn[b"a"] = b"1"
    assert db[b"a"] == b"1"
    with pytest.raises(RuntimeError):
        with db.transaction() as txn:
            txn[b"b"] = b"1"
            raise RuntimeError("boom")
    assert b"b" not in db
    # A commit inside the block is not repeated at its end.
    with db.transaction() as txn:
        txn[b"c"] = b"1"
        txn.commit()
    assert db[b"c"] == b"1"


def test_keyspaces_in_one_transaction(db):
    users = db.keyspace("users")
    emails = db.keyspace("emails")
    users[b"u1"] = b"ann@example.com"
    with db.transaction() as txn:
        tu, te = txn.keyspace(users), txn.keyspace(emails)
        email = tu[b"u1"]
        te[email] = b"u1"
        tu.put(b"u2", b"bob@example.com")
        te[b"bob@example.com"] = b"u2"
        assert list(te.keys()) == [b"ann@example.com", b"bob@example.com"]
        assert b"u1" not in txn  # the default keyspace
        tu.delete(b"gone")
    assert emails[b"ann@example.com"] == b"u1"
    assert users[b"u2"] == b"bob@example.com"


def test_transaction_iterator_sees_later_batches_of_own_writes(db):
    for i in range(100):
        db[b"%03d" % i] = b"db"
    txn = db.transaction()
    it = txn.items()
    first = next(it)
    txn[b"999"] = b"txn"
    rest = list(it)
    assert first == (b"000", b"db")
    assert rest[-1] == (b"999", b"txn")
    txn.rollback()
    it2 = txn.items()
    with pytest.raises(turtlekv.ClosedError):
        next(it2)


def test_counter_with_retries_from_threads(db):
    db[b"counter"] = b"0"

    def bump(times):
        for _ in range(times):
            while True:
                txn = db.transaction()
                txn[b"counter"] = b"%d" % (int(txn[b"counter"]) + 1)
                try:
                    txn.commit()
                    break
                except turtlekv.ConflictError:
                    continue

    threads = [threading.Thread(target=bump, args=(50,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db[b"counter"] == b"200"
