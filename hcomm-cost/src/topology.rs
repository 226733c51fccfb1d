//! A machine as the model sees it: nested levels of links, from the links
//! between devices of one node to the fabric between nodes, each with a
//! latency and a bandwidth; read from a small TOML file.
//!
//! ```toml
//! name = "two-nodes"
//! reduce_gbs = 500.0        # bytes reduced per second on one rank, GB/s
//! [[level]]
//! name = "hccs"
//! ranks = 8                 # ranks per group at this level (a node)
//! link = "mesh"             # mesh | switch | ring
//! bandwidth_gbs = 28.0      # per direction: per pair (mesh), per endpoint (switch), per hop (ring)
//! latency_us = 2.0
//! [[level]]                 # the last level joins every group
//! name = "roce"
//! link = "switch"
//! bandwidth_gbs = 200.0     # per node: the node's network ports together
//! latency_us = 8.0
//! ```

use serde::Deserialize;

use crate::error::{CostError, Result};

/// How the endpoints of one level are linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    /// A switch: each endpoint has `bandwidth_gbs` in and out, shared by
    /// all its messages of a round.
    Switch,
    /// A direct link per pair of endpoints, `bandwidth_gbs` each way,
    /// shared by the messages of that pair.
    Mesh,
    /// A bidirectional ring: a message crosses the hops between its two
    /// endpoints the shorter way; each hop has `bandwidth_gbs` each way.
    Ring,
}

/// One level of links.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level {
    /// Its name (`nvlink`, `roce`, `shm`).
    pub name: String,
    /// Ranks per group at this level (consecutive ranks); `None` on the
    /// last level, which joins all.
    #[serde(default)]
    pub ranks: Option<usize>,
    /// How its endpoints (the groups of the level below, or single ranks
    /// on the first level) are linked.
    pub link: Link,
    /// Bandwidth per direction in GB/s (10^9 bytes per second).
    pub bandwidth_gbs: f64,
    /// Per-message latency in microseconds.
    pub latency_us: f64,
    /// Messages of at most this many bytes move at
    /// `cached_bandwidth_gbs` instead (a host whose copies stay in its
    /// caches); both or neither.
    #[serde(default)]
    pub cached_bytes: Option<f64>,
    /// The bandwidth of messages up to `cached_bytes`, GB/s.
    #[serde(default)]
    pub cached_bandwidth_gbs: Option<f64>,
    /// Messages larger than `cached_bytes` and of at most this many bytes
    /// move at `llc_bandwidth_gbs` (a host whose copies of a round still
    /// fit its last-level cache, shared by its cores, while larger ones
    /// stream from memory); both or neither, and larger than
    /// `cached_bytes` where that is given.
    #[serde(default)]
    pub llc_bytes: Option<f64>,
    /// The bandwidth of messages up to `llc_bytes`, GB/s.
    #[serde(default)]
    pub llc_bandwidth_gbs: Option<f64>,
    /// All messages of a round that cross this level within one group
    /// share this bandwidth too, GB/s (a host's memory system, which its
    /// ranks share; a node's uplink). Scaled like `bandwidth_gbs` for
    /// messages up to `cached_bytes`.
    #[serde(default)]
    pub shared_gbs: Option<f64>,
}

impl Level {
    /// The bandwidth a message of `bytes` gets, GB/s.
    pub(crate) fn bandwidth_for(&self, bytes: f64) -> f64 {
        match (
            self.cached_bytes,
            self.cached_bandwidth_gbs,
            self.llc_bytes,
            self.llc_bandwidth_gbs,
        ) {
            (Some(limit), Some(bw), _, _) if bytes <= limit => bw,
            (_, _, Some(limit), Some(bw)) if bytes <= limit => bw,
            _ => self.bandwidth_gbs,
        }
    }

    /// The bandwidth the level's group shares for a message of `bytes`,
    /// GB/s (`None`: not shared).
    pub(crate) fn shared_for(&self, bytes: f64) -> Option<f64> {
        self.shared_gbs
            .map(|s| s * self.bandwidth_for(bytes) / self.bandwidth_gbs)
    }
}

/// The shared board of ranks in one memory system (hcomm's one-shot
/// collectives): what one synchronisation costs, a `[board]` table.
///
/// ```toml
/// [board]
/// latency_us = 0.3          # publish, count and wait, each rank on a core
/// cores = 2                 # more ranks than this take turns on the cores
/// oversubscribed_us = 5.0   # added to a synchronisation of more ranks than `cores`
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Board {
    /// One synchronisation when every rank runs on a core of its own, us.
    pub latency_us: f64,
    /// Cores the ranks run on (`None`: as many as ranks).
    #[serde(default)]
    pub cores: Option<usize>,
    /// Added to a synchronisation of more ranks than `cores`: a rank waits
    /// for peers that are not running; both or neither.
    #[serde(default)]
    pub oversubscribed_us: Option<f64>,
}

impl Board {
    /// One synchronisation of `world` ranks, us.
    pub(crate) fn sync_us(&self, world: usize) -> f64 {
        match (self.cores, self.oversubscribed_us) {
            (Some(c), Some(o)) if world > c => self.latency_us + o,
            _ => self.latency_us,
        }
    }
}

/// A machine: nested levels and the reduction speed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Its name.
    pub name: String,
    /// Bytes one rank reduces per second into a received buffer, in GB/s
    /// (the model's gamma is its inverse).
    pub reduce_gbs: f64,
    /// Where the figures come from (a vendor document, or the fitting
    /// command).
    #[serde(default)]
    pub source: String,
    /// The levels, innermost first.
    #[serde(rename = "level")]
    pub levels: Vec<Level>,
    /// The shared board, where the ranks have one (`None`: a one-shot
    /// synchronisation costs the latency of the level joining the ranks).
    #[serde(default)]
    pub board: Option<Board>,
}

impl Machine {
    /// Parses and checks a topology from TOML text; `source_name` names it
    /// in errors (a file name).
    pub fn from_toml(text: &str, source_name: &str) -> Result<Machine> {
        let m: Machine = toml::from_str(text).map_err(|e| CostError::Parse {
            source_name: source_name.to_owned(),
            message: e.message().to_owned(),
        })?;
        m.validate()?;
        Ok(m)
    }

    /// Reads a topology file.
    pub fn from_file(path: &std::path::Path) -> Result<Machine> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| CostError::Parse {
            source_name: name.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        Machine::from_toml(&text, &name)
    }

    /// One level joining every rank: a full mesh (`ring == false`) or a ring
    /// of single ranks.
    pub fn flat(name: &str, link: Link, bandwidth_gbs: f64, latency_us: f64, reduce_gbs: f64) -> Machine {
        Machine {
            name: name.to_owned(),
            reduce_gbs,
            source: String::new(),
            board: None,
            levels: vec![Level {
                name: "links".to_owned(),
                ranks: None,
                link,
                bandwidth_gbs,
                latency_us,
                cached_bytes: None,
                cached_bandwidth_gbs: None,
                llc_bytes: None,
                llc_bandwidth_gbs: None,
                shared_gbs: None,
            }],
        }
    }

    /// `self` with its ranks in groups of `group` consecutive ranks: the
    /// existing levels inside a group, and links between groups with
    /// `factor` times the latency and `1 / factor` of the bandwidth of the
    /// outermost existing level, on a switch (a `custom:<group>` topology).
    pub fn grouped(&self, group: usize, factor: f64) -> Result<Machine> {
        let mut m = self.clone();
        let Some(outer) = m.levels.last_mut() else {
            return Err(self.invalid("it has no `level`".to_owned()));
        };
        outer.ranks = Some(group);
        let between = Level {
            name: format!("between groups of {group}"),
            ranks: None,
            link: Link::Switch,
            bandwidth_gbs: outer.bandwidth_gbs / factor,
            latency_us: outer.latency_us * factor,
            cached_bytes: None,
            cached_bandwidth_gbs: None,
            llc_bytes: None,
            llc_bandwidth_gbs: None,
            shared_gbs: None,
        };
        m.levels.push(between);
        m.name = format!("{} in groups of {group}", self.name);
        m.validate()?;
        Ok(m)
    }

    fn invalid(&self, message: String) -> CostError {
        CostError::Invalid {
            name: self.name.clone(),
            message,
        }
    }

    /// Checks the values: at least one level, positive finite figures,
    /// group sizes that grow and divide each other, none on the last level.
    pub fn validate(&self) -> Result<()> {
        if self.levels.is_empty() {
            return Err(self.invalid("it has no `level`; hint: add at least one `[[level]]` table".to_owned()));
        }
        if !(self.reduce_gbs.is_finite() && self.reduce_gbs > 0.0) {
            return Err(self.invalid(format!("`reduce_gbs` is {}, not a positive number", self.reduce_gbs)));
        }
        if let Some(b) = &self.board {
            self.validate_board(b)?;
        }
        let mut below = 1;
        let last = self.levels.len() - 1;
        for (i, l) in self.levels.iter().enumerate() {
            if !(l.bandwidth_gbs.is_finite() && l.bandwidth_gbs > 0.0) {
                return Err(self.invalid(format!(
                    "level `{}` has `bandwidth_gbs` = {}, not a positive number",
                    l.name, l.bandwidth_gbs
                )));
            }
            if !(l.latency_us.is_finite() && l.latency_us >= 0.0) {
                return Err(self.invalid(format!(
                    "level `{}` has `latency_us` = {}, not a number >= 0",
                    l.name, l.latency_us
                )));
            }
            if let Some(g) = l.shared_gbs.filter(|g| !(g.is_finite() && *g > 0.0)) {
                return Err(self.invalid(format!(
                    "level `{}` has `shared_gbs` = {g}, not a positive number",
                    l.name
                )));
            }
            match (l.cached_bytes, l.cached_bandwidth_gbs) {
                (None, None) => {}
                (Some(b), Some(bw)) if b.is_finite() && b > 0.0 && bw.is_finite() && bw > 0.0 => {}
                (b, bw) => {
                    return Err(self.invalid(format!(
                        "level `{}` has `cached_bytes` = {b:?} and `cached_bandwidth_gbs` = {bw:?}; give both, positive, or neither",
                        l.name
                    )))
                }
            }
            match (l.llc_bytes, l.llc_bandwidth_gbs) {
                (None, None) => {}
                (Some(b), Some(bw))
                    if b.is_finite() && b > l.cached_bytes.unwrap_or(0.0) && bw.is_finite() && bw > 0.0 => {}
                (b, bw) => {
                    return Err(self.invalid(format!(
                        "level `{}` has `llc_bytes` = {b:?} and `llc_bandwidth_gbs` = {bw:?}; give both, positive and `llc_bytes` above `cached_bytes`, or neither",
                        l.name
                    )))
                }
            }
            match (l.ranks, i == last) {
                (Some(_), true) => {
                    return Err(self.invalid(format!(
                        "the last level `{}` has `ranks`; it joins every rank. hint: remove `ranks` there",
                        l.name
                    )))
                }
                (None, false) => {
                    return Err(self.invalid(format!(
                        "level `{}` has no `ranks`; only the last level may omit it",
                        l.name
                    )))
                }
                (Some(r), false) if r <= below || !r.is_multiple_of(below) => {
                    return Err(self.invalid(format!(
                        "level `{}` has `ranks` = {r}, which is not a multiple of the {below} ranks of the level below it, and larger",
                        l.name
                    )))
                }
                (Some(r), false) => below = r,
                (None, true) => {}
            }
        }
        Ok(())
    }

    fn validate_board(&self, b: &Board) -> Result<()> {
        if !(b.latency_us.is_finite() && b.latency_us >= 0.0) {
            return Err(self.invalid(format!("`board.latency_us` is {}, not a number >= 0", b.latency_us)));
        }
        match (b.cores, b.oversubscribed_us) {
            (None, None) => Ok(()),
            (Some(c), Some(o)) if c >= 1 && o.is_finite() && o >= 0.0 => Ok(()),
            (c, o) => Err(self.invalid(format!(
                "`board.cores` is {c:?} and `board.oversubscribed_us` is {o:?}; give both (cores >= 1, microseconds >= 0) or neither"
            ))),
        }
    }

    /// Ranks per group at level `i` (`world` for the last level).
    pub(crate) fn group(&self, i: usize, world: usize) -> usize {
        self.levels[i].ranks.unwrap_or(world).max(1)
    }

    /// Ranks per endpoint at level `i`: the group of the level below.
    pub(crate) fn endpoint(&self, i: usize, world: usize) -> usize {
        if i == 0 {
            1
        } else {
            self.group(i - 1, world)
        }
    }

    /// The level where ranks `a` and `b` meet: the first whose group holds
    /// both.
    pub(crate) fn meet(&self, a: usize, b: usize, world: usize) -> usize {
        let last = self.levels.len() - 1;
        (0..last)
            .find(|&i| a / self.group(i, world) == b / self.group(i, world))
            .unwrap_or(last)
    }
}
