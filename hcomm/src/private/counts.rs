//! The count parameters of one schedule call (`counts: &[usize; world]`,
//! `sizes: &[[usize; world]; world]`): their entries, checked against the
//! world size, and the lengths and parts the body computes from them.

use super::exec::Region;
use super::int;
use crate::error::{Error, Result};

/// A line of a count parameter: a count vector, or a row or column of a
/// count matrix (index into the call's count parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountLine {
    /// The vector parameter.
    Vector(usize),
    /// Row `i` of the matrix parameter: what rank `i` sends to each rank.
    Row(usize, i64),
    /// Column `j` of the matrix parameter: what each rank sends to rank `j`.
    Col(usize, i64),
}

/// The count parameters of one call, in declaration order.
#[derive(Clone, Debug)]
pub struct Counts {
    world: usize,
    /// Name and entries (a matrix row-major).
    params: Vec<(&'static str, Vec<usize>)>,
}

impl Counts {
    pub(super) fn new(world: usize) -> Self {
        Counts {
            world,
            params: Vec::new(),
        }
    }

    /// Every parameter's name and entries, for the entry agreement.
    pub(super) fn entries(&self) -> &[(&'static str, Vec<usize>)] {
        &self.params
    }

    /// Adds parameter `name`: `world` entries, or `world * world` when
    /// `matrix`.
    pub(super) fn register(&mut self, name: &'static str, values: &[usize], matrix: bool) -> Result<()> {
        let w = self.world;
        let want = if matrix { w.checked_mul(w) } else { Some(w) };
        if Some(values.len()) != want {
            let shape = if matrix {
                format!("world * world = {w} * {w} count entries, row-major")
            } else {
                format!("world = {w} count entries")
            };
            return Err(Error::buffer_length(name, values.len(), shape));
        }
        for &v in values {
            int(v)?;
        }
        self.params.push((name, values.to_vec()));
        Ok(())
    }

    /// The entries of `line`.
    pub(super) fn line(&self, line: CountLine) -> Result<Vec<usize>> {
        let w = self.world;
        let (param, pick) = match line {
            CountLine::Vector(p) => (p, None),
            CountLine::Row(p, i) => (p, Some((true, i))),
            CountLine::Col(p, j) => (p, Some((false, j))),
        };
        let (name, values) = self
            .params
            .get(param)
            .ok_or_else(|| Error::precondition(format!("unknown count parameter #{param}")))?;
        let Some((row, at)) = pick else {
            return Ok(values.clone());
        };
        let at = usize::try_from(at).ok().filter(|&a| a < w).ok_or_else(|| {
            Error::precondition(format!(
                "region out of bounds: {} {at} of `{name}`, a {w} x {w} count matrix",
                if row { "row" } else { "column" }
            ))
        })?;
        Ok((0..w)
            .map(|k| if row { values[at * w + k] } else { values[k * w + at] })
            .collect())
    }

    /// The sum of the entries of `line` before `i` (`i` in `0..=world`).
    pub fn count_prefix(&self, line: CountLine, i: i64) -> Result<i64> {
        let entries = self.line(line)?;
        let i = usize::try_from(i)
            .ok()
            .filter(|&i| i <= entries.len())
            .ok_or_else(|| Error::precondition(format!("region out of bounds: part {i} of {}", entries.len())))?;
        int(entries[..i].iter().sum())
    }

    /// Entry `i` of `line`.
    pub fn count(&self, line: CountLine, i: i64) -> Result<i64> {
        let entries = self.line(line)?;
        let v = usize::try_from(i)
            .ok()
            .and_then(|i| entries.get(i))
            .ok_or_else(|| Error::precondition(format!("count entry {i} is not in 0..{}", entries.len())))?;
        int(*v)
    }

    /// The sum of the entries of `line`.
    pub fn count_sum(&self, line: CountLine) -> Result<i64> {
        self.count_prefix(line, int(self.world)?)
    }

    /// Part `i` of `r` laid out by `line`: the elements from the sum of the
    /// entries before `i`, entry `i` long (checked where it is used).
    pub fn part(&self, r: Region, line: CountLine, i: i64) -> Result<Region> {
        let start = r.start.checked_add(self.count_prefix(line, i)?);
        let end = start.and_then(|s| s.checked_add(self.count(line, i).ok()?));
        match (start, end) {
            (Some(start), Some(end)) if end <= r.end => Ok(Region { buf: r.buf, start, end }),
            _ => Err(Error::precondition(format!(
                "region out of bounds: part {i} of a region of {} elements",
                r.end - r.start
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parts_and_wrong_shapes() {
        let mut c = Counts::new(3);
        c.register("counts", &[2, 0, 3], false).unwrap();
        // sizes[i][j]: what rank i sends to rank j
        c.register("sizes", &[1, 2, 3, 4, 5, 6, 7, 8, 9], true).unwrap();
        assert_eq!(c.count_sum(CountLine::Vector(0)).unwrap(), 5);
        assert_eq!(c.line(CountLine::Row(1, 1)).unwrap(), [4, 5, 6]);
        assert_eq!(c.line(CountLine::Col(1, 2)).unwrap(), [3, 6, 9]);
        let whole = Region {
            buf: 0,
            start: 10,
            end: 15,
        };
        let p = c.part(whole, CountLine::Vector(0), 2).unwrap();
        assert_eq!((p.start, p.end), (12, 15));
        let empty = c.part(whole, CountLine::Vector(0), 1).unwrap();
        assert_eq!((empty.start, empty.end), (12, 12));
        assert!(c.part(whole, CountLine::Vector(0), 3).is_err());
        assert!(c.line(CountLine::Row(1, 3)).is_err());
        let e = Counts::new(3).register("counts", &[1, 2], false).unwrap_err();
        assert!(e.to_string().contains("counts"), "{e}");
    }
}
