//! What every connection shares: the database, the settings, the `SCAN`
//! cursors and the counters `INFO` reports.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;
use turtlekv::{Db, Keyspace, WriteOptions};

use crate::config::{Config, SyncMode};
use crate::store::Space;

/// How many `SCAN` cursors the server remembers; the oldest is forgotten
/// first (a client that comes back with it gets an error).
pub const MAX_SCAN_CURSORS: usize = 65_536;

#[derive(Debug)]
pub struct Shared {
    pub db: Db,
    pub config: Config,
    /// The write options every write uses. Never synced one by one: under
    /// `--sync always` a batch's writes are synced together before its
    /// replies leave (`sync_before_reply`).
    pub write: WriteOptions,
    /// `--sync always`: a batch that wrote syncs the log before replying.
    pub sync_before_reply: bool,
    /// The longest key the database takes (what `FLUSHDB`'s range ends at).
    pub max_key_len_bytes: usize,
    keyspaces: Mutex<HashMap<u32, Keyspace>>,
    cursors: Mutex<Cursors>,
    pub counters: Counters,
    /// Told once when `SHUTDOWN` or a signal asks the server to stop.
    pub shutdown: Notify,
    pub started: Instant,
}

#[derive(Debug, Default)]
pub struct Counters {
    pub connections_current: AtomicUsize,
    pub connections_total: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub commands: AtomicU64,
    /// Transaction commits retried after a conflict (atomic commands and
    /// `EXEC`), and `EXEC`s aborted because a watched key changed.
    pub txn_retries: AtomicU64,
    pub exec_aborts: AtomicU64,
    pub protocol_errors: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Cursors {
    next_id: u64,
    positions: HashMap<u64, (u32, Bytes)>,
    order: VecDeque<u64>,
}

impl Shared {
    pub fn new(db: Db, config: Config) -> Self {
        let max_key_len_bytes = largest_key_len(&db);
        Shared {
            db,
            sync_before_reply: config.sync == SyncMode::Always,
            config,
            write: WriteOptions::new(),
            max_key_len_bytes,
            keyspaces: Mutex::new(HashMap::new()),
            cursors: Mutex::new(Cursors::default()),
            counters: Counters::default(),
            shutdown: Notify::new(),
            started: Instant::now(),
        }
    }

    /// Database `index` (`SELECT`): 0 is the default keyspace; any other
    /// is opened, and created durably the first time, as keyspace `db<n>`.
    pub fn space(&self, index: u32) -> turtlekv::Result<Space> {
        if index == 0 {
            return Ok(Space::Default);
        }
        let mut open = self.keyspaces.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ks) = open.get(&index) {
            return Ok(Space::Named(ks.clone()));
        }
        let ks = self.db.keyspace(format!("db{index}"))?;
        open.insert(index, ks.clone());
        Ok(Space::Named(ks))
    }

    /// Remembers where a `SCAN` of database `db_index` goes on, and returns
    /// the cursor that names it (never 0, which starts and ends a scan).
    pub fn save_cursor(&self, db_index: u32, next_key: Bytes) -> u64 {
        let mut c = self.cursors.lock().unwrap_or_else(|e| e.into_inner());
        c.next_id += 1;
        let id = c.next_id;
        c.positions.insert(id, (db_index, next_key));
        c.order.push_back(id);
        while c.order.len() > MAX_SCAN_CURSORS {
            if let Some(old) = c.order.pop_front() {
                c.positions.remove(&old);
            }
        }
        id
    }

    /// The key a cursor resumes at, if the server still remembers it for
    /// this database.
    pub fn cursor(&self, db_index: u32, id: u64) -> Option<Bytes> {
        let c = self.cursors.lock().unwrap_or_else(|e| e.into_inner());
        match c.positions.get(&id) {
            Some((db, key)) if *db == db_index => Some(key.clone()),
            _ => None,
        }
    }
}

/// The longest key `db` accepts (512 bytes with the default page sizes).
fn largest_key_len(db: &Db) -> usize {
    let (mut ok, mut too_long) = (1, turtlekv::MAX_KEY_SIZE + 1);
    while too_long - ok > 1 {
        let mid = (ok + too_long) / 2;
        if db.check_entry(vec![0xff; mid], None).is_ok() {
            ok = mid;
        } else {
            too_long = mid;
        }
    }
    ok
}
