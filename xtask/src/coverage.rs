//! `cargo xtask coverage`.

use crate::setup::Result;

pub fn coverage(_rest: &[String]) -> Result<()> {
    Err("not yet".into())
}
