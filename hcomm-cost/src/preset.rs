//! Machines described in the crate's `presets/` directory (TOML, the same
//! format as a user's topology file), with their sources in each file.

use crate::error::{CostError, Result};
use crate::topology::Machine;

/// Every preset: its name and its TOML text.
pub const PRESETS: [(&str, &str); 5] = [
    ("ascend-910b-node", include_str!("../presets/ascend-910b-node.toml")),
    ("ascend-910b-pod", include_str!("../presets/ascend-910b-pod.toml")),
    ("dgx-h100", include_str!("../presets/dgx-h100.toml")),
    ("host", include_str!("../presets/host.toml")),
    ("host-processes", include_str!("../presets/host-processes.toml")),
];

/// The machine `arg` names: a TOML topology file (a path ending in
/// `.toml`) or a preset name ([`PRESETS`]).
pub fn machine(arg: &str) -> Result<Machine> {
    let path = std::path::Path::new(arg);
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) {
        Machine::from_file(path)
    } else {
        preset(arg)
    }
}

/// The preset `name`.
pub fn preset(name: &str) -> Result<Machine> {
    let (_, text) = PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| CostError::Invalid {
            name: name.to_owned(),
            message: format!(
                "no such preset; expected one of {}",
                PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        })?;
    Machine::from_toml(text, name)
}
