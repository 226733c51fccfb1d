//! What can go wrong: a topology that does not parse or does not make sense,
//! or a schedule the model cannot cost.

/// An error of the cost model.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum CostError {
    /// A topology file or text that is not valid TOML of the expected shape.
    #[error("topology `{source_name}` does not parse: {message}")]
    Parse {
        /// The file name (or `text` for a string).
        source_name: String,
        /// The parser's message.
        message: String,
    },
    /// A topology whose values do not make sense (named in the message).
    #[error("topology `{name}`: {message}")]
    Invalid {
        /// The topology's name.
        name: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A file of `hcomm-bench --json` rows that cannot be read (`line` 0)
    /// or has a bad row.
    #[error("benchmark rows `{file}`, line {line}: {message}")]
    Rows {
        /// The file.
        file: String,
        /// The line (from 1; 0: the file as a whole).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A schedule, algorithm or world size the model cannot cost.
    #[error("cannot predict `{what}`: {message}")]
    Unsupported {
        /// The schedule or algorithm.
        what: String,
        /// Why.
        message: String,
    },
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, CostError>;
