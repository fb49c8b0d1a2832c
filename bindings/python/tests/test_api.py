"""Every method of Db, Keyspace and WriteBatch, and the errors they raise."""

import os
import re
from pathlib import Path

import pytest

import turtlekv
from conftest import SMALL

REPO = Path(__file__).resolve().parents[3]


def test_mapping_protocol(db):
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    assert b"k" in db
    assert b"x" not in db
    with pytest.raises(KeyError) as e:
        db[b"x"]
    assert e.value.args == (b"x",)
    del db[b"k"]
    assert b"k" not in db
    # Like rocksdict, deleting an absent key raises nothing.
    del db[b"k"]
    assert list(db) == []


def test_get_put_delete(db):
    assert db.get(b"a") is None
    assert db.get(b"a", b"dflt") == b"dflt"
    db.put(b"a", b"1")
    db.put(b"b", b"2", sync=True)
    assert db.get(b"a", b"dflt") == b"1"
    assert isinstance(db.get(b"b"), bytes)
    db.delete(b"a")
    db.delete(b"b", sync=True)
    assert db.get(b"a") is None and db.get(b"b") is None


def test_accepts_bytes_like(db):
    db[bytearray(b"ba")] = bytearray(b"x")
    db[memoryview(b"mv")] = memoryview(b"y")
    db[memoryview(b"xxslice")[2:]] = b"z"
    assert db[b"ba"] == b"x" and db[b"mv"] == b"y" and db[b"slice"] == b"z"
    assert db.get(memoryview(b"ba")) == b"x"
    assert bytearray(b"mv") in db


@pytest.mark.parametrize("bad", ["text", 1, None, 1.5, [b"a"]])
def test_refuses_non_bytes(db, bad):
    with pytest.raises(TypeError) as e:
        db[bad] = b"v"
    if isinstance(bad, str):
        assert "encode" in str(e.value)
    with pytest.raises(TypeError):
        db[b"k"] = bad
    with pytest.raises(TypeError):
        db.get(bad)
    if bad is not None:  # None is "no bound"
        with pytest.raises(TypeError):
            db.items(start=bad)


def test_input_errors(db):
    with pytest.raises(turtlekv.InvalidArgumentError):
        db[b""] = b"v"
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        db[b"k" * (turtlekv.MAX_KEY_SIZE + 1)] = b"v"
    with pytest.raises(turtlekv.InvalidArgumentError):
        db[b"k"] = b"v" * (turtlekv.MAX_VALUE_SIZE + 1)
    with pytest.raises(turtlekv.InvalidArgumentError) as e:
        db.delete_range(b"b", b"a")
    assert (e.value.start, e.value.end) == (b"b", b"a")
    assert isinstance(e.value, turtlekv.Error)
    assert list(db.keys()) == []


def test_delete_range(db):
    for i in range(100):
        db[b"k%03d" % i] = b"v"
    db.delete_range(b"k010", b"k090")
    assert len(list(db.keys())) == 20
    db.delete_range(b"k000", b"k010", sync=True)
    assert list(db.keys())[0] == b"k090"


def test_multi_get_first_last_len(db):
    assert db.first_key_value() is None and db.last_key_value() is None
    assert db.approximate_len() == 0
    for k in [b"b", b"a", b"c"]:
        db[k] = k.upper()
    assert db.multi_get([b"a", b"x", bytearray(b"c")]) == [b"A", None, b"C"]
    assert db.multi_get(iter([])) == []
    assert db.multi_get([b"k%d" % i for i in range(40)] + [b"b"])[-1] == b"B"
    assert db.first_key_value() == (b"a", b"A")
    assert db.last_key_value() == (b"c", b"C")
    assert db.approximate_len() == 3
    # An exact count would read every key: no len().
    with pytest.raises(TypeError):
        len(db)


def test_write_batch(db):
    db[b"gone"] = b"x"
    batch = turtlekv.WriteBatch()
    batch.put(b"a", b"1")
    batch[b"b"] = bytearray(b"2")
    batch.delete(b"gone")
    batch.put(b"r1", b"x")
    batch.put(b"r2", b"x")
    batch.delete_range(b"r", b"s")
    del batch[b"nothing"]
    assert len(batch) == 7
    assert "7 writes" in repr(batch)
    db.write(batch)
    assert dict(db.items()) == {b"a": b"1", b"b": b"2"}
    # Writing leaves the batch as it was; it may be written again.
    assert len(batch) == 7
    batch.clear()
    assert len(batch) == 0
    batch.put(b"c", b"3")
    db.write(batch, sync=True)
    assert db[b"c"] == b"3"


def test_write_batch_is_all_or_nothing(db):
    batch = turtlekv.WriteBatch()
    batch.put(b"ok", b"1")
    batch.put(b"", b"empty key")
    with pytest.raises(turtlekv.InvalidArgumentError):
        db.write(batch)
    assert b"ok" not in db


def test_keyspaces(db):
    users = db.keyspace("users")
    index = db.keyspace(b"index")
    assert users.name == b"users"
    assert "users" in repr(users)
    users[b"u1"] = b"ann"
    users.put(b"u2", b"bob", sync=True)
    assert b"u1" not in db  # separate from the default keyspace
    assert users[b"u1"] == b"ann" and users.get(b"zz", 0) == 0
    assert list(users.items()) == [(b"u1", b"ann"), (b"u2", b"bob")]
    assert users.multi_get([b"u2", b"u3"]) == [b"bob", None]
    assert users.first_key_value() == (b"u1", b"ann")
    assert users.last_key_value() == (b"u2", b"bob")
    assert users.approximate_len() == 2
    del users[b"u2"]
    users.delete(b"u1")
    users[b"a1"] = b"x"
    users[b"a2"] = b"x"
    users.delete_range(b"a1", b"a2")
    assert list(users.keys()) == [b"a2"]

    batch = turtlekv.WriteBatch()
    batch.put(b"u9", b"zoe", keyspace=users)
    batch.put(b"zoe", b"u9", keyspace=index)
    batch.delete(b"a2", keyspace=users)
    batch.delete_range(b"a", b"b", keyspace=index)
    db.write(batch)
    assert users[b"u9"] == b"zoe" and index[b"zoe"] == b"u9"
    assert b"a2" not in users

    assert db.keyspace_names() == [b"index", b"users"]
    s = users.stats()
    assert s["name"] == b"users" and s["puts"] >= 3 and s["gets"] >= 1
    assert {k["name"] for k in db.stats()["keyspaces"]} >= {b"", b"users", b"index"}

    db.drop_keyspace("index")
    assert db.keyspace_names() == [b"users"]
    with pytest.raises(turtlekv.KeyspaceDroppedError) as e:
        index[b"zoe"]
    assert e.value.name == b"index"
    with pytest.raises(turtlekv.KeyspaceNotFoundError):
        db.drop_keyspace("never")
    with pytest.raises(turtlekv.InvalidArgumentError):
        db.keyspace(b"")
    with pytest.raises(TypeError):
        db.keyspace(5)


def test_foreign_keyspace(tmp_path):
    with turtlekv.open(tmp_path / "a", **SMALL) as a, turtlekv.open(tmp_path / "b", **SMALL) as b:
        ks = a.keyspace("k")
        batch = turtlekv.WriteBatch()
        batch.put(b"x", b"y", keyspace=ks)
        with pytest.raises(turtlekv.KeyspaceError):
            b.write(batch)


def test_stats_has_every_engine_field(db):
    db[b"a"] = b"b"
    db.get(b"a")
    stats = db.stats()
    assert stats["puts"] == 1 and stats["gets"] == 1
    # Every u64 field the engine's public `Stats` lists is in the dict.
    api = (REPO / "crates/turtlekv/public-api.txt").read_text()
    line = next(l for l in api.splitlines() if l.startswith("struct Stats: #[non_exhaustive]"))
    fields = re.findall(r"pub (\w+): u64", line)
    assert len(fields) > 50
    assert set(fields) <= set(stats)
    for derived in ["write_amplification", "space_amplification", "disk_reads_per_get"]:
        assert isinstance(stats[derived], float)


def test_checkpoint_flush_check_setters(db):
    for i in range(2000):
        db[b"key%05d" % i] = b"v" * 100
    db.flush_wal()
    db.checkpoint()
    assert db.stats()["checkpoints"] >= 1
    report = db.check()
    assert report["superblock"] is True
    assert report["tree_keys"] + report["memtable_keys"] >= 2000
    db.set_cache_capacity("32MiB")
    assert db.stats()["memory_budget_bytes"] == 32 << 20
    db.set_checkpoint_distance(4 << 20)
    db.set_record_cache_capacity("1MiB")
    with pytest.raises(turtlekv.InvalidOptionsError):
        db.set_cache_capacity(1)
    with pytest.raises(ValueError):
        db.set_cache_capacity("lots")
    assert db[b"key01999"] == b"v" * 100


def test_options(path):
    with turtlekv.open(
        path,
        cache_capacity_bytes="32MiB",
        checkpoint_distance_bytes=4 << 20,
        record_cache_capacity_bytes="1 MiB",
        leaf_size_bytes="64KiB",
        node_size_bytes="4KiB",
        filter_bits_per_key=10,
        garbage_percent=30,
        checkpoint_threads=1,
        direct_io=False,
        checkpoint_on_read_pressure=True,
        checkpoint_io_idle=False,
        record_cache_auto_split=False,
        write_only_checkpoint_distance_bytes=0,
        wal_segment_size_bytes="4MB",
        wal_recovery="point-in-time",
        compression="zstd:3",
        create_if_missing=True,
    ) as db:
        db[b"a"] = b"b"
        assert db.stats()["memory_budget_bytes"] == 32 << 20
    with turtlekv.open(path, load_stored_options=True) as db:
        assert db[b"a"] == b"b"


@pytest.mark.parametrize(
    "options, error",
    [
        (dict(bogus=1), TypeError),
        (dict(cache_capacity_bytes="many"), ValueError),
        (dict(cache_capacity_bytes=-1), ValueError),
        (dict(cache_capacity_bytes=True), TypeError),
        (dict(cache_capacity_bytes=1.5), TypeError),
        (dict(direct_io=1), TypeError),
        (dict(checkpoint_threads="2"), ValueError),
        (dict(compression="snappy"), turtlekv.InvalidOptionsError),
        (dict(compression=3), TypeError),
        (dict(wal_recovery="lenient"), turtlekv.InvalidOptionsError),
        (dict(cache_capacity_bytes=1024), turtlekv.InvalidOptionsError),
        (dict(read_only=True, direct_io=True), TypeError),
    ],
)
def test_bad_options(path, options, error):
    with pytest.raises(error):
        turtlekv.open(path, **options)


def test_create_if_missing_false(path):
    with pytest.raises(turtlekv.IoError) as e:
        turtlekv.open(path, create_if_missing=False)
    assert isinstance(e.value, OSError)


def test_locked_and_read_only(path):
    db = turtlekv.open(path, **SMALL)
    db[b"a"] = b"1"
    assert turtlekv.is_in_use(path)
    with pytest.raises(turtlekv.LockedError) as e:
        turtlekv.open(path)
    assert Path(e.value.path) == Path(path)
    db.close()
    assert not turtlekv.is_in_use(path)
    with turtlekv.open(path, read_only=True) as ro:
        assert ro.read_only
        assert ro[b"a"] == b"1"
        with pytest.raises(turtlekv.ReadOnlyError):
            ro[b"b"] = b"2"


def test_reopen_keeps_everything(path):
    with turtlekv.open(path, **SMALL) as db:
        for i in range(3000):
            db[b"%06d" % i] = b"x" * (i % 50)
        db.keyspace("ks")[b"k"] = b"v"
        db.delete_range(b"000100", b"000200")
    with turtlekv.open(path, **SMALL) as db:
        assert db.approximate_len() > 0
        keys = list(db.keys())
        assert len(keys) == 2900
        assert db[b"002999"] == b"x" * (2999 % 50)
        assert db.keyspace("ks")[b"k"] == b"v"


def test_close(path):
    db = turtlekv.open(path, **SMALL)
    assert not db.closed
    db[b"a"] = b"1"
    ks = db.keyspace("k")
    snap = db.snapshot()
    it = db.items()
    txn = db.transaction()
    db.close()
    assert db.closed and "closed" in repr(db)
    db.close()  # twice is fine
    for call in [
        lambda: db[b"a"],
        lambda: db.put(b"a", b"b"),
        lambda: db.items(),
        lambda: db.snapshot(),
        lambda: db.stats(),
        lambda: ks[b"a"],
        lambda: snap[b"a"],
        lambda: next(it),
        lambda: txn.get(b"a"),
        lambda: db.write(turtlekv.WriteBatch()),
    ]:
        with pytest.raises(turtlekv.ClosedError):
            call()
    # Everything was released with it: the directory is free at once,
    # although the snapshot, iterator, keyspace and transaction live on.
    with turtlekv.open(path, **SMALL) as again:
        assert again[b"a"] == b"1"


def test_context_manager_closes_on_exception(path):
    with pytest.raises(RuntimeError):
        with turtlekv.open(path, **SMALL) as db:
            db[b"a"] = b"1"
            raise RuntimeError("boom")
    assert db.closed
    with turtlekv.open(path, **SMALL) as db:
        assert db[b"a"] == b"1"


def test_backup(db, tmp_path):
    for i in range(500):
        db[b"k%04d" % i] = b"v%d" % i
    db.keyspace("ks")[b"x"] = b"y"
    report = db.backup(tmp_path / "copy")
    assert report["sequence"] > 0
    with turtlekv.open(tmp_path / "copy") as copy:
        assert dict(copy.items()) == dict(db.items())
        assert copy.keyspace("ks")[b"x"] == b"y"
    with pytest.raises(turtlekv.BackupTargetError):
        db.backup(tmp_path / "copy")  # not empty
    # Through the holder's control socket.
    report = turtlekv.backup_at(db.path, tmp_path / "copy2")
    assert report["sequence"] > 0
    with turtlekv.open(tmp_path / "copy2", read_only=True) as copy:
        assert copy[b"k0499"] == b"v499"


def test_properties_and_docs(db, path):
    assert Path(db.path) == Path(path)
    assert not db.read_only
    assert str(path) in repr(db)
    # help() is useful: every public method has a docstring.
    for cls in [turtlekv.Db, turtlekv.Keyspace, turtlekv.Snapshot, turtlekv.Transaction,
                turtlekv.WriteBatch]:
        assert cls.__doc__ and len(cls.__doc__) > 40, cls
        for name in dir(cls):
            if not name.startswith("_"):
                assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
    assert "sync" in turtlekv.Db.put.__doc__
    assert turtlekv.open.__doc__ and "read_only" in turtlekv.open.__doc__
    assert turtlekv.Db.items.__text_signature__ == "($self, start=None, end=None, reverse=False, prefix=None)"


def test_rust_get_loop_hook(db):
    """The benchmark hook (bench/overhead.py) looks keys up as `get` does."""
    from turtlekv._turtlekv import _rust_get_loop

    db[b"a"] = b"1"
    db[b"b"] = b"2"
    nanos, found = _rust_get_loop(db, [b"a", b"x", bytearray(b"b")])
    assert found == 2 and nanos >= 0
    with pytest.raises(TypeError):
        _rust_get_loop(db, ["a"])


def test_error_hierarchy():
    for name in turtlekv._errors.__all__:
        cls = getattr(turtlekv, name)
        assert issubclass(cls, turtlekv.Error)
    assert issubclass(turtlekv.IoError, OSError)
    assert issubclass(turtlekv.InvalidOptionsError, ValueError)


def test_corruption_is_an_exception(path):
    with turtlekv.open(path, **SMALL) as db:
        for i in range(3000):
            db[b"%06d" % i] = os.urandom(100)
        db.checkpoint()
    # Damage the middle of the leaf pages' file.
    leaves = Path(path) / "leaves.pages"
    size = leaves.stat().st_size
    assert size > 64 << 10
    with open(leaves, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xff" * 8192)
    with pytest.raises(turtlekv.CorruptionError) as e:
        with turtlekv.open(path, **SMALL) as db:
            db.check()
    assert e.value.file and e.value.reason
