import pytest

import turtlekv

# Small memory settings keep each test's database light; `tiny` also makes
# a few hundred kilobytes of writes checkpoint into the tree, so that reads
# and iterators cross the MemTable and the tree.
SMALL = dict(cache_capacity_bytes="16MiB", wal_segment_size_bytes="1MiB")


@pytest.fixture
def path(tmp_path):
    return tmp_path / "db"


@pytest.fixture
def db(path):
    with turtlekv.open(path, **SMALL) as db:
        yield db
