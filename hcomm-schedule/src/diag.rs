//! Diagnostics: what the checker reports, in a form the macro turns into
//! compile errors and the runtime into `hcomm::Error::Schedule` messages.

use std::fmt;

use crate::ir::SpanId;

/// The kind of a diagnostic; [`DiagKind::as_str`] gives the leading words of
/// its message (language reference, section 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DiagKind {
    /// `syntax error` (mostly the macro's; the checker uses it for statements
    /// that are not allowed where they stand, e.g. `copy` inside `batch`, and
    /// for a wrong number of function arguments).
    SyntaxError,
    /// `unknown name`
    UnknownName,
    /// `non-linear length`
    NonLinearLength,
    /// `missing range`
    MissingRange,
    /// `empty verify set`: no (world, scalars) combination is left to check
    EmptyVerifySet,
    /// `write to read-only buffer`
    WriteToReadOnly,
    /// `rank-dependent group`
    RankDependentGroup,
    /// `evaluation error`
    EvaluationError,
    /// `rank out of range`
    RankOutOfRange,
    /// `send to self`
    SendToSelf,
    /// `recv from self`
    RecvFromSelf,
    /// `region out of bounds`
    RegionOutOfBounds,
    /// `uneven chunk`
    UnevenChunk,
    /// `unmatched send`
    UnmatchedSend,
    /// `unmatched recv`
    UnmatchedRecv,
    /// `length mismatch`
    LengthMismatch,
    /// `deadlock`
    Deadlock,
    /// `collective mismatch`
    CollectiveMismatch,
    /// `buffer hazard`
    BufferHazard,
    /// `batch rule`
    BatchRule,
    /// `unwaited request`
    UnwaitedRequest,
    /// `unknown request`
    UnknownRequest,
    /// `postcondition violated`
    PostconditionViolated,
}

impl DiagKind {
    /// The message's leading words, e.g. `"deadlock"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DiagKind::SyntaxError => "syntax error",
            DiagKind::UnknownName => "unknown name",
            DiagKind::NonLinearLength => "non-linear length",
            DiagKind::MissingRange => "missing range",
            DiagKind::EmptyVerifySet => "empty verify set",
            DiagKind::WriteToReadOnly => "write to read-only buffer",
            DiagKind::RankDependentGroup => "rank-dependent group",
            DiagKind::EvaluationError => "evaluation error",
            DiagKind::RankOutOfRange => "rank out of range",
            DiagKind::SendToSelf => "send to self",
            DiagKind::RecvFromSelf => "recv from self",
            DiagKind::RegionOutOfBounds => "region out of bounds",
            DiagKind::UnevenChunk => "uneven chunk",
            DiagKind::UnmatchedSend => "unmatched send",
            DiagKind::UnmatchedRecv => "unmatched recv",
            DiagKind::LengthMismatch => "length mismatch",
            DiagKind::Deadlock => "deadlock",
            DiagKind::CollectiveMismatch => "collective mismatch",
            DiagKind::BufferHazard => "buffer hazard",
            DiagKind::BatchRule => "batch rule",
            DiagKind::UnwaitedRequest => "unwaited request",
            DiagKind::UnknownRequest => "unknown request",
            DiagKind::PostconditionViolated => "postcondition violated",
        }
    }

    /// The check (language reference, section 7) that reports this kind: `0` for the
    /// world-independent checks, then `1` (evaluation) to `7`
    /// (postcondition).
    pub const fn step(self) -> u8 {
        match self {
            DiagKind::SyntaxError
            | DiagKind::UnknownName
            | DiagKind::NonLinearLength
            | DiagKind::MissingRange
            | DiagKind::EmptyVerifySet
            | DiagKind::WriteToReadOnly
            | DiagKind::RankDependentGroup => 0,
            DiagKind::EvaluationError => 1,
            DiagKind::RankOutOfRange
            | DiagKind::SendToSelf
            | DiagKind::RecvFromSelf
            | DiagKind::RegionOutOfBounds
            | DiagKind::UnevenChunk => 2,
            DiagKind::UnmatchedSend | DiagKind::UnmatchedRecv | DiagKind::LengthMismatch => 3,
            DiagKind::Deadlock | DiagKind::CollectiveMismatch => 4,
            DiagKind::BufferHazard | DiagKind::BatchRule => 5,
            DiagKind::UnwaitedRequest | DiagKind::UnknownRequest => 6,
            DiagKind::PostconditionViolated => 7,
        }
    }
}

impl fmt::Display for DiagKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One error found by the checker.
///
/// The text the compiler prints is the [`Display`](fmt::Display) form:
/// `"{kind}: {message}"`, followed by `"\nhint: {hint}"` when there is a hint.
/// `notes` are secondary locations; the macro reports each as
/// an extra error at its span with the note's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// What went wrong (also the message's leading words).
    pub kind: DiagKind,
    /// The concrete situation, *without* the leading kind: e.g.
    /// "with world = 2, rank 0 blocks in `send` to rank 1 while rank 1 blocks
    /// in `send` to rank 0". Lower-case, no trailing period, DSL tokens in
    /// backticks.
    pub message: String,
    /// The statement or expression at fault.
    pub span: SpanId,
    /// Secondary locations with their text ("receive expected here", one per
    /// other blocking step of a deadlock cycle, ...).
    pub notes: Vec<(SpanId, String)>,
    /// How to fix it, when known (printed as "hint: ...").
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without notes or hint.
    pub fn new(kind: DiagKind, span: SpanId, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            span,
            notes: Vec::new(),
            hint: None,
        }
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a secondary location.
    #[must_use]
    pub fn with_note(mut self, span: SpanId, note: impl Into<String>) -> Self {
        self.notes.push((span, note.into()));
        self
    }

    /// The first line of the full text: `"{kind}: {message}"`.
    pub fn headline(&self) -> String {
        format!("{}: {}", self.kind.as_str(), self.message)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// Collects diagnostics under the section 6 limits: at most one per key
/// (a statement, or another source item) and at most [`MAX_DIAGNOSTICS`] in
/// all.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    list: Vec<Diagnostic>,
    keys: Vec<u64>,
}

/// At most this many errors are reported.
pub(crate) const MAX_DIAGNOSTICS: usize = 8;

impl Sink {
    /// Records `d` unless `key` already has one or the list is full.
    pub(crate) fn push(&mut self, key: u64, d: Diagnostic) {
        if self.list.len() >= MAX_DIAGNOSTICS || self.keys.contains(&key) {
            return;
        }
        self.keys.push(key);
        self.list.push(d);
    }

    /// Whether nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether no more diagnostics will be accepted.
    pub(crate) fn is_full(&self) -> bool {
        self.list.len() >= MAX_DIAGNOSTICS
    }

    /// The diagnostics, in the order recorded.
    pub(crate) fn into_vec(self) -> Vec<Diagnostic> {
        self.list
    }
}

/// Key of a diagnostic about a statement.
pub(crate) fn stmt_key(id: u32) -> u64 {
    u64::from(id)
}

/// Key of a diagnostic about a source item other than a statement.
pub(crate) fn span_key(span: SpanId) -> u64 {
    (1 << 32) | u64::from(span.0)
}
