//! `turtlekv-stress`: a `db_stress`-style workload for TurtleKV. Writer
//! threads update keys they own and record every write in an expected-state
//! file beside the database before and after the database acknowledges it;
//! reader threads check that every value they see was written, is not older
//! than what was acknowledged and never goes back in time; a third kind of
//! thread turns the memory knobs and forces checkpoints. The kill loop
//! kills runs with SIGKILL and restarts them, and each start verifies the
//! database against the expected state.

pub mod expected;
pub mod kill_loop;
pub mod run;
pub mod value;
pub mod verify;
