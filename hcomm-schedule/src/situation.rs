//! How messages describe where something happens: the world size, scalar
//! values and enclosing loop variables ("with world = 4, root = 1, s = 2"),
//! ordinals and tags.

use std::fmt;

use crate::compile::Prog;

/// The concrete situation of a message: world size, scalar values and the
/// enclosing loop variables, rendered as "with world = 4, root = 1, s = 2".
#[derive(Clone, Copy, Debug)]
pub(crate) struct Situation<'a> {
    pub(crate) prog: &'a Prog<'a>,
    pub(crate) world: i64,
    pub(crate) scalars: &'a [i64],
    pub(crate) loops: &'a [(&'a str, u32)],
    pub(crate) vals: &'a [i64],
}

impl<'a> Situation<'a> {
    /// World size and scalars only.
    pub(crate) fn plain(prog: &'a Prog<'a>, world: i64, scalars: &'a [i64]) -> Self {
        Self {
            prog,
            world,
            scalars,
            loops: &[],
            vals: &[],
        }
    }
}

impl fmt::Display for Situation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "with world = {}", self.world)?;
        for (sc, v) in self.prog.s.scalars.iter().zip(self.scalars) {
            write!(f, ", {} = {}", sc.name, sc.show(*v))?;
        }
        for ((name, _), v) in self.loops.iter().zip(self.vals) {
            write!(f, ", {name} = {v}")?;
        }
        Ok(())
    }
}

/// "rank 3" or, for ordinals in messages, "1st"/"2nd"/...
pub(crate) fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// " with tag T" when the tag is not the default 0.
pub(crate) fn tag_text(tag: i64) -> String {
    if tag == 0 {
        String::new()
    } else {
        format!(" with tag {tag}")
    }
}
