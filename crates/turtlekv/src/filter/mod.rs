//! See DESIGN.md; filled in by its issue.
