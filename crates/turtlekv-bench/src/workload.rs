//! The YCSB core workloads: which operations each mixes, in what share.

use std::fmt;

use crate::rng::Rng;

/// One of the YCSB core workloads, or the initial load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Workload {
    /// Inserts of every record, in hashed key order.
    Load,
    /// Update heavy: 50% read, 50% update.
    A,
    /// Read mostly: 95% read, 5% update.
    B,
    /// Read only.
    C,
    /// Read latest: 95% read of recent records, 5% insert.
    D,
    /// Short ranges: 95% scan of 1..=100 records, 5% insert.
    E,
    /// Read-modify-write: 50% read, 50% read then write back.
    F,
}

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Insert,
    Read,
    Update,
    Scan,
    ReadModifyWrite,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 5] = [
        OpKind::Insert,
        OpKind::Read,
        OpKind::Update,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
    ];

    /// Short name used in the table and JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "rmw",
        }
    }

    /// Position in [`OpKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Operation shares in percent; they sum to 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    pub read_percent: u32,
    pub update_percent: u32,
    pub insert_percent: u32,
    pub scan_percent: u32,
    pub rmw_percent: u32,
}

impl Workload {
    /// The workloads in YCSB's order.
    pub const ALL: [Workload; 7] = [
        Workload::Load,
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
    ];

    /// Lower-case name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Load => "load",
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
        }
    }

    /// The operation mix, from YCSB's `workloads/workload[a-f]` files.
    pub fn mix(self) -> Mix {
        let m = |read, update, insert, scan, rmw| Mix {
            read_percent: read,
            update_percent: update,
            insert_percent: insert,
            scan_percent: scan,
            rmw_percent: rmw,
        };
        match self {
            Workload::Load => m(0, 0, 100, 0, 0),
            Workload::A => m(50, 50, 0, 0, 0),
            Workload::B => m(95, 5, 0, 0, 0),
            Workload::C => m(100, 0, 0, 0, 0),
            Workload::D => m(95, 0, 5, 0, 0),
            Workload::E => m(0, 0, 5, 95, 0),
            Workload::F => m(50, 0, 0, 0, 50),
        }
    }

    /// Whether reads prefer the newest records (workload D).
    pub fn reads_latest(self) -> bool {
        self == Workload::D
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Mix {
    /// Draws the next operation.
    pub fn choose(&self, rng: &mut Rng) -> OpKind {
        let mut roll = rng.below(100) as u32;
        for (share, kind) in [
            (self.read_percent, OpKind::Read),
            (self.update_percent, OpKind::Update),
            (self.insert_percent, OpKind::Insert),
            (self.scan_percent, OpKind::Scan),
            (self.rmw_percent, OpKind::ReadModifyWrite),
        ] {
            if roll < share {
                return kind;
            }
            roll -= share;
        }
        unreachable!("mix shares sum to 100")
    }

    /// The expected share of inserts, for sizing key domains.
    pub fn insert_fraction(&self) -> f64 {
        f64::from(self.insert_percent) / 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_sum_to_100_and_match_ycsb() {
        for w in Workload::ALL {
            let m = w.mix();
            let total = m.read_percent
                + m.update_percent
                + m.insert_percent
                + m.scan_percent
                + m.rmw_percent;
            assert_eq!(total, 100, "{w}");
        }
        assert_eq!(Workload::B.mix().read_percent, 95);
        assert_eq!(Workload::E.mix().scan_percent, 95);
        assert_eq!(Workload::F.mix().rmw_percent, 50);
    }

    #[test]
    fn choose_follows_the_shares() {
        let mut rng = Rng::new(8);
        let mix = Workload::B.mix();
        let draws = 100_000;
        let updates = (0..draws)
            .filter(|_| mix.choose(&mut rng) == OpKind::Update)
            .count();
        assert!((4_000..6_000).contains(&updates), "{updates}");
        let mix = Workload::C.mix();
        assert!((0..1000).all(|_| mix.choose(&mut rng) == OpKind::Read));
    }
}
