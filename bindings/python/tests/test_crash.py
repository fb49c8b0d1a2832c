"""A child process writes and is killed with SIGKILL (by its pid): every
write it acknowledged, synced or not, is there after a reopen (a process
crash loses nothing the engine handed to the operating system; `sync=True`
also survives a machine crash, which a test cannot stage)."""

import os
import signal
import subprocess
import sys
import textwrap

import turtlekv

CHILD = textwrap.dedent(
    """
    import sys
    import turtlekv

    db = turtlekv.open(sys.argv[1], cache_capacity_bytes="16MiB",
                       checkpoint_distance_bytes="1MiB")
    ks = db.keyspace("ks")
    i = 0
    while True:
        sync = i % 4 == 0
        value = b"%d" % i * 50
        if i % 3 == 0:
            batch = turtlekv.WriteBatch()
            batch.put(b"b%08d" % i, value)
            batch.put(b"k%08d" % i, value, keyspace=ks)
            db.write(batch, sync=sync)
        else:
            db.put(b"p%08d" % i, value, sync=sync)
        # Acknowledged: the parent may count on it.
        sys.stdout.write("%d\\n" % i)
        sys.stdout.flush()
        i += 1
    """
)


def test_kill_9_keeps_acknowledged_writes(tmp_path):
    path = tmp_path / "db"
    for round_ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        acked = -1
        try:
            target = 2000 + 1500 * round_
            for line in child.stdout:
                acked = int(line)
                if acked >= target:
                    break
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        # Lines written after the last one read may also have been
        # acknowledged; those up to `acked` certainly were.
        assert acked >= 2000
        with turtlekv.open(path, cache_capacity_bytes="16MiB") as db:
            ks = db.keyspace("ks")
            for i in range(acked + 1):
                value = b"%d" % i * 50
                if i % 3 == 0:
                    assert db[b"b%08d" % i] == value, i
                    assert ks[b"k%08d" % i] == value, i
                else:
                    assert db[b"p%08d" % i] == value, i
            db.check()
