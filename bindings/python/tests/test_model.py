"""A model test: random operations on a database and on a dict must agree,
across batches, range deletions, transactions, snapshots, keyspaces and
reopens (hypothesis shrinks a failure to a short sequence)."""

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import turtlekv

# A small alphabet (with 0x00 and 0xff, the edges of prefix bounds) so that
# operations hit the same keys and ranges often.
keys = st.binary(min_size=1, max_size=3).map(lambda b: bytes(x % 4 * 85 for x in b))
values = st.binary(max_size=20)
bounds = st.none() | keys
spaces = st.sampled_from([None, "ks"])

# Tiny pages and MemTables: a few hundred writes checkpoint into the tree.
OPTIONS = dict(
    cache_capacity_bytes="8MiB",
    checkpoint_distance_bytes="64KiB",
    leaf_size_bytes="16KiB",
    node_size_bytes="4KiB",
    wal_segment_size_bytes="64KiB",
)


def expected_items(model, start, end, prefix, reverse):
    out = [
        (k, v)
        for k, v in sorted(model.items())
        if (start is None or k >= start)
        and (end is None or k < end)
        and (prefix is None or k.startswith(prefix))
    ]
    return out[::-1] if reverse else out


class DbModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="turtlekv-model-")
        self.db = turtlekv.open(self.dir, **OPTIONS)
        self.models = {None: {}, "ks": {}}
        self.snapshots = []

    def target(self, space):
        return self.db if space is None else self.db.keyspace(space)

    @rule(space=spaces, k=keys, v=values, sync=st.booleans())
    def put(self, space, k, v, sync):
        self.target(space).put(k, v, sync=sync)
        self.models[space][k] = v

    @rule(space=spaces, k=keys)
    def delete(self, space, k):
        del self.target(space)[k]
        self.models[space].pop(k, None)

    @rule(space=spaces, a=keys, b=keys)
    def delete_range(self, space, a, b):
        start, end = min(a, b), max(a, b)
        if start == end:
            return
        self.target(space).delete_range(start, end)
        model = self.models[space]
        for k in [k for k in model if start <= k < end]:
            del model[k]

    @rule(ops=st.lists(st.tuples(spaces, keys, st.none() | values), max_size=20))
    def batch(self, ops):
        batch = turtlekv.WriteBatch()
        for space, k, v in ops:
            ks = None if space is None else self.db.keyspace(space)
            if v is None:
                batch.delete(k, keyspace=ks)
            else:
                batch.put(k, v, keyspace=ks)
        self.db.write(batch)
        for space, k, v in ops:
            if v is None:
                self.models[space].pop(k, None)
            else:
                self.models[space][k] = v

    @rule(ops=st.lists(st.tuples(keys, st.none() | values), max_size=10), read=keys)
    def transaction(self, ops, read):
        with self.db.transaction() as txn:
            assert txn.get(read) == self.models[None].get(read)
            for k, v in ops:
                if v is None:
                    del txn[k]
                else:
                    txn[k] = v
        for k, v in ops:
            if v is None:
                self.models[None].pop(k, None)
            else:
                self.models[None][k] = v

    @rule(space=spaces, k=keys)
    def get(self, space, k):
        assert self.target(space).get(k) == self.models[space].get(k)
        assert (k in self.target(space)) == (k in self.models[space])

    @rule(space=spaces, start=bounds, end=bounds, prefix=st.none() | keys, reverse=st.booleans())
    def scan(self, space, start, end, prefix, reverse):
        got = list(self.target(space).items(start=start, end=end, prefix=prefix, reverse=reverse))
        assert got == expected_items(self.models[space], start, end, prefix, reverse)

    @rule()
    def take_snapshot(self):
        self.snapshots.append((self.db.snapshot(), dict(self.models[None])))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def check_snapshot(self, data):
        snap, model = data.draw(st.sampled_from(self.snapshots))
        assert list(snap.items()) == sorted(model.items())

    @rule()
    def checkpoint(self):
        self.db.checkpoint()

    @rule()
    def reopen(self):
        self.db.close()
        self.snapshots = []
        self.db = turtlekv.open(self.dir, **OPTIONS)

    @invariant()
    def first_and_last(self):
        model = self.models[None]
        first = min(model.items()) if model else None
        last = max(model.items()) if model else None
        assert self.db.first_key_value() == first
        assert self.db.last_key_value() == last

    def teardown(self):
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DbModel.TestCase.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
test_model = DbModel.TestCase
