//! The catalog: which name is which keyspace, kept as keys of its own
//! keyspace (so the WAL makes its changes atomic and durable like any
//! batch), and mirrored in memory.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock};

use super::cleaner::Cleaner;
use super::core::KeyspaceCore;
use super::tag::{CATALOG_ID, DEFAULT_ID, FIRST_NAMED_ID, KeyspaceId, MAX_ID, Tag};
use crate::db::DbInner;
use crate::db::iter::Iter;
use crate::{Error, Result, WriteBatch};

/// Catalog key kinds, after the catalog's tag.
const NAME_KIND: u8 = b'n';
const DROPPED_KIND: u8 = b'd';
const NEXT_ID_KIND: u8 = b'i';

/// Longest keyspace name.
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// The keyspaces of one open database.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// Whether stored keys carry tags: `false` for a database an earlier
    /// build created, which has only the default keyspace.
    pub tagged: bool,
    /// The `Db`'s own keyspace.
    pub default: Arc<KeyspaceCore>,
    /// `None` until the catalog's keys were read: an open reads them, but
    /// a damaged page under them fails only the keyspace calls (each
    /// tries again), not the open, so the default keyspace stays readable.
    named: Mutex<Option<Named>>,
    /// Writes to named keyspaces hold it shared from their liveness check
    /// until their batch is applied; a drop holds it exclusively, so no
    /// write lands in a keyspace after its drop (where the cleaner, which
    /// starts after the drop, might miss it).
    pub write_gate: RwLock<()>,
    pub cleaner: Cleaner,
}

#[derive(Debug)]
pub(crate) struct Named {
    by_name: BTreeMap<Bytes, Arc<KeyspaceCore>>,
    next_id: KeyspaceId,
}

impl Default for Named {
    fn default() -> Self {
        Named {
            by_name: BTreeMap::new(),
            next_id: FIRST_NAMED_ID,
        }
    }
}

impl Catalog {
    pub fn new(tagged: bool) -> Self {
        let default_tag = if tagged {
            Tag::of(DEFAULT_ID)
        } else {
            Tag::BARE
        };
        Catalog {
            tagged,
            default: Arc::new(KeyspaceCore::new(DEFAULT_ID, Bytes::new(), default_tag)),
            named: Mutex::new((!tagged).then(Named::default)),
            write_gate: RwLock::new(()),
            cleaner: Cleaner::default(),
        }
    }

    /// Reads the catalog's keys (if not yet read), and restarts the
    /// cleaning of keyspaces dropped before.
    pub fn load(&self, db: &Arc<DbInner>) -> Result<MutexGuard<'_, Option<Named>>> {
        let mut guard = self.named.lock();
        if guard.is_some() {
            return Ok(guard);
        }
        let stored = read_stored(db)?;
        let mut named = Named::default();
        for (id, name) in stored.live {
            let core = KeyspaceCore::new(id, name.clone(), Tag::of(id));
            named.by_name.insert(name, Arc::new(core));
        }
        named.next_id = stored.next_id.unwrap_or(FIRST_NAMED_ID);
        let dropped = stored.dropped;
        *guard = Some(named);
        // A read-only handle cleans nothing: the next writable open does.
        if !db.poison.is_read_only() {
            for id in dropped {
                self.cleaner.enqueue(db, id);
            }
        }
        Ok(guard)
    }

    /// The live keyspace `name`, created (durably) if it does not exist.
    pub fn open(&self, db: &Arc<DbInner>, name: &[u8]) -> Result<Arc<KeyspaceCore>> {
        self.check_name(name)?;
        let mut guard = self.load(db)?;
        let named = guard.as_mut().expect("loaded");
        if let Some(core) = named.by_name.get(name) {
            return Ok(core.clone());
        }
        let id = named.next_id;
        if id > MAX_ID {
            return Err(Error::TooManyKeyspaces(u64::from(id - FIRST_NAMED_ID)));
        }
        let mut batch = WriteBatch::new();
        batch.push_stored(&name_key(name), Some(&id.to_be_bytes()));
        batch.push_stored(&kind_key(NEXT_ID_KIND, &[]), Some(&(id + 1).to_be_bytes()));
        db.submit_batch(batch, true, None)?;
        named.next_id = id + 1;
        let name = Bytes::copy_from_slice(name);
        let core = Arc::new(KeyspaceCore::new(id, name.clone(), Tag::of(id)));
        named.by_name.insert(name, core.clone());
        Ok(core)
    }

    /// Drops keyspace `name`: durably, at once for every handle, and its
    /// keys are deleted in the background.
    pub fn drop_keyspace(&self, db: &Arc<DbInner>, name: &[u8]) -> Result<()> {
        self.check_name(name)?;
        let gate = self.write_gate.write();
        let mut guard = self.load(db)?;
        let named = guard.as_mut().expect("loaded");
        let Some(core) = named.by_name.get(name).cloned() else {
            return Err(Error::KeyspaceNotFound(name.to_vec()));
        };
        let mut batch = WriteBatch::new();
        batch.push_stored(&name_key(name), None);
        batch.push_stored(&dropped_key(core.id), Some(name));
        db.submit_batch(batch, true, None)?;
        core.mark_dropped();
        named.by_name.remove(name);
        drop((guard, gate));
        self.cleaner.enqueue(db, core.id);
        Ok(())
    }

    /// Names of the live named keyspaces, in byte order.
    pub fn names(&self, db: &Arc<DbInner>) -> Result<Vec<Bytes>> {
        let guard = self.load(db)?;
        Ok(guard
            .iter()
            .flat_map(|n| n.by_name.keys().cloned())
            .collect())
    }

    /// The live named keyspaces (none while the catalog is unread).
    pub fn named(&self) -> Vec<Arc<KeyspaceCore>> {
        let guard = self.named.lock();
        guard
            .iter()
            .flat_map(|n| n.by_name.values().cloned())
            .collect()
    }

    /// Checks the stored catalog (`Db::check`): ids below the next id and
    /// given once, a live keyspace never also dropped, names that match
    /// the handles' view. Returns the number of named keyspaces.
    pub fn check(&self, db: &Arc<DbInner>) -> Result<u64> {
        if !self.tagged {
            return Ok(0);
        }
        // Held throughout, so that no create or drop lands between what
        // is read and what it is compared with.
        let guard = self.named.lock();
        let Stored {
            live,
            dropped,
            next_id,
        } = read_stored(db)?;
        let ids = live.len() + dropped.len();
        let next_id = match next_id {
            Some(id) => id,
            None if ids == 0 => FIRST_NAMED_ID,
            None => return Err(corrupt(db, "keyspaces but no next id")),
        };
        let mut all: Vec<KeyspaceId> = live.iter().map(|(id, _)| *id).chain(dropped).collect();
        all.sort_unstable();
        all.dedup();
        if all.len() != ids
            || all
                .iter()
                .any(|&id| !(FIRST_NAMED_ID..next_id).contains(&id))
        {
            return Err(corrupt(
                db,
                "a keyspace id given twice or not below the next id",
            ));
        }
        if let Some(named) = guard.as_ref() {
            let mut names: Vec<&Bytes> = live.iter().map(|(_, name)| name).collect();
            let known: Vec<&Bytes> = named.by_name.keys().collect();
            names.sort();
            if names != known {
                return Err(corrupt(db, "names that differ from the open keyspaces'"));
            }
        }
        Ok(live.len() as u64)
    }

    fn check_name(&self, name: &[u8]) -> Result<()> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(Error::InvalidKeyspaceName {
                len_bytes: name.len(),
            });
        }
        if !self.tagged {
            return Err(Error::KeyspacesUnsupported);
        }
        Ok(())
    }
}

/// Marks that keyspace `id` is dropped and its keys are being deleted:
/// removed (in the same WAL order) once they all are.
pub(super) fn dropped_key(id: KeyspaceId) -> Vec<u8> {
    kind_key(DROPPED_KIND, &id.to_be_bytes())
}

fn name_key(name: &[u8]) -> Vec<u8> {
    kind_key(NAME_KIND, name)
}

fn kind_key(kind: u8, rest: &[u8]) -> Vec<u8> {
    [Tag::of(CATALOG_ID).as_bytes(), &[kind], rest].concat()
}

/// The catalog's keys as stored.
struct Stored {
    /// Live keyspaces: id and name.
    live: Vec<(KeyspaceId, Bytes)>,
    /// Dropped keyspaces not yet cleaned.
    dropped: Vec<KeyspaceId>,
    /// `None` before the first keyspace was created.
    next_id: Option<KeyspaceId>,
}

fn read_stored(db: &Arc<DbInner>) -> Result<Stored> {
    let mut stored = Stored {
        live: Vec::new(),
        dropped: Vec::new(),
        next_id: None,
    };
    for item in catalog_iter(db) {
        let (key, value) = item?;
        match key.get(1) {
            Some(&NAME_KIND) => stored.live.push((decode_id(db, &value)?, key.slice(2..))),
            Some(&DROPPED_KIND) => stored.dropped.push(decode_id(db, &key[2..])?),
            Some(&NEXT_ID_KIND) => stored.next_id = Some(decode_id(db, &value)?),
            _ => return Err(corrupt(db, "an unknown key kind")),
        }
    }
    Ok(stored)
}

fn catalog_iter(db: &Arc<DbInner>) -> Iter {
    let (lower, upper) = Tag::of(CATALOG_ID).bounds(Bound::Unbounded, Bound::Unbounded);
    Iter::new(db.clone(), db.versions.read_view(), lower, upper)
}

fn decode_id(db: &DbInner, bytes: &[u8]) -> Result<KeyspaceId> {
    let bytes: [u8; 4] = bytes
        .try_into()
        .map_err(|_| corrupt(db, "an id that is not 4 bytes"))?;
    Ok(KeyspaceId::from_be_bytes(bytes))
}

fn corrupt(db: &DbInner, what: &str) -> Error {
    Error::corruption(&db.path, 0, format!("the keyspace catalog holds {what}"))
}
