//! [`parse_schedules`]: schedules from text, checked as the macro checks
//! them, with diagnostics that carry the line and column of the text.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use hcomm_schedule::ir;
use hcomm_schedule::resolve::LenBinding;
use hcomm_schedule::syntax::{self, Rejection};
use hcomm_schedule::DiagKind;

/// Every kind, to read a message's leading words back.
const KINDS: [DiagKind; 23] = [
    DiagKind::SyntaxError,
    DiagKind::UnknownName,
    DiagKind::NonLinearLength,
    DiagKind::MissingRange,
    DiagKind::EmptyVerifySet,
    DiagKind::WriteToReadOnly,
    DiagKind::RankDependentGroup,
    DiagKind::EvaluationError,
    DiagKind::RankOutOfRange,
    DiagKind::SendToSelf,
    DiagKind::RecvFromSelf,
    DiagKind::RegionOutOfBounds,
    DiagKind::UnevenChunk,
    DiagKind::UnmatchedSend,
    DiagKind::UnmatchedRecv,
    DiagKind::LengthMismatch,
    DiagKind::Deadlock,
    DiagKind::CollectiveMismatch,
    DiagKind::BufferHazard,
    DiagKind::BatchRule,
    DiagKind::UnwaitedRequest,
    DiagKind::UnknownRequest,
    DiagKind::PostconditionViolated,
];

/// One error of a schedule text: what `comm_schedule!` reports for the same
/// source, where it reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextDiagnostic {
    /// The kind (the message's leading words).
    pub kind: DiagKind,
    /// The world size the check failed at, when the message names one.
    pub world: Option<i64>,
    /// Line of the text, from 1.
    pub line: usize,
    /// Column, from 1, in characters (as the compiler counts them).
    pub column: usize,
    /// The message after `"{kind}: "`, without the hint.
    pub message: String,
    /// The hint, when there is one (printed as `"hint: .."`).
    pub hint: Option<String>,
}

impl TextDiagnostic {
    /// Reads an error text `"{kind}: {message}[\nhint: {hint}]"` at `line`,
    /// `column`.
    fn from_text(line: usize, column: usize, text: &str) -> Self {
        let (head, hint) = match text.split_once("\nhint: ") {
            Some((head, hint)) => (head, Some(hint.to_owned())),
            None => (text, None),
        };
        let (kind, message) = KINDS
            .iter()
            .find_map(|k| {
                head.strip_prefix(k.as_str())
                    .and_then(|rest| rest.strip_prefix(": "))
                    .map(|rest| (*k, rest))
            })
            .unwrap_or((DiagKind::SyntaxError, head));
        let world = message
            .split_once("world = ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok());
        TextDiagnostic {
            kind,
            world,
            line,
            column,
            message: message.to_owned(),
            hint,
        }
    }

    /// The error's text as the compiler prints it for `comm_schedule!`:
    /// `"{kind}: {message}"`, plus `"\nhint: {hint}"`.
    pub fn text(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{}: {}\nhint: {hint}", self.kind, self.message),
            None => format!("{}: {}", self.kind, self.message),
        }
    }
}

impl fmt::Display for TextDiagnostic {
    /// `"{line}:{column}: {text}"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.text())
    }
}

impl std::error::Error for TextDiagnostic {}

/// What a checked schedule keeps for its runs: lives for the rest of the
/// process, like the caches of run-time verification keyed by it.
pub(super) struct Parsed {
    /// The item's source text.
    pub(super) source: String,
    /// The resolved, checked IR.
    pub(super) ir: ir::Schedule,
    /// How the length variables are bound, in evaluation order.
    pub(super) len_bindings: Vec<LenBinding>,
    /// The text of each `#[requires]` condition.
    pub(super) requires: Vec<String>,
    /// The call site of each `over` collective (by the statement's address),
    /// numbered in source order as the macro numbers them.
    pub(super) sites: HashMap<usize, u32>,
}

/// A schedule read from text by [`parse_schedules`], checked on its verify
/// set like a `comm_schedule!` function. Run it with [`TextSchedule::call`].
#[derive(Clone, Copy)]
pub struct TextSchedule {
    pub(super) parsed: &'static Parsed,
}

impl fmt::Debug for TextSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextSchedule")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl TextSchedule {
    /// The function's name.
    pub fn name(&self) -> &'static str {
        &self.parsed.ir.name
    }

    /// The checked IR (what `NAME::SCHEDULE` is for a macro schedule): for
    /// [`check_world`](hcomm_schedule::check_world), drawings, plans.
    pub fn ir(&self) -> &'static ir::Schedule {
        &self.parsed.ir
    }

    /// The item's source text, as tokens.
    pub fn source(&self) -> &'static str {
        &self.parsed.source
    }
}

/// Parses every `fn` item of `src` (what goes between the braces of
/// `comm_schedule! { .. }`, doc comments and attributes included) and checks
/// each on its verify set, as the macro does at compile time.
///
/// A schedule is kept for the rest of the process (its run-time verification
/// caches are too); parsing the same item text again returns the schedule
/// kept the first time. The parser (`proc_macro2` with line and column
/// information) also keeps, per thread, the text of every string it parsed
/// there, for its spans: parse a schedule file once, not once per call.
///
/// # Errors
///
/// Every item's errors, with the texts and places `comm_schedule!` gives for
/// the same source (at most 8 per item, notes as extra diagnostics).
pub fn parse_schedules(src: &str) -> Result<Vec<TextSchedule>, Vec<TextDiagnostic>> {
    let input = syntax::parse_str(src).map_err(|e| {
        e.into_iter()
            .map(|e| {
                let start = e.span().start();
                TextDiagnostic::from_text(start.line, start.column + 1, &e.to_string())
            })
            .collect::<Vec<_>>()
    })?;
    let mut schedules = Vec::new();
    let mut diagnostics = Vec::new();
    for item in &input.items {
        match checked(item) {
            Ok(s) => schedules.push(s),
            Err(rejection) => diagnostics.extend(rejection.errors.iter().map(|(sp, text)| {
                let (line, column) = sp.line_column();
                TextDiagnostic::from_text(line, column, text)
            })),
        }
    }
    if diagnostics.is_empty() {
        Ok(schedules)
    } else {
        Err(diagnostics)
    }
}

/// The schedules kept so far, by item text.
fn kept() -> &'static Mutex<HashMap<String, &'static Parsed>> {
    static KEPT: OnceLock<Mutex<HashMap<String, &'static Parsed>>> = OnceLock::new();
    KEPT.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `item` checked, from the kept schedules or parsed, resolved and checked
/// now.
fn checked(item: &syntax::Item) -> Result<TextSchedule, Rejection> {
    let source = item.source();
    if let Some(parsed) = kept().lock().unwrap_or_else(PoisonError::into_inner).get(&source) {
        return Ok(TextSchedule { parsed });
    }
    let front = syntax::front(item)?;
    syntax::check(&front)?;
    let requires = front.ir.requires.iter().map(ToString::to_string).collect();
    let parsed = Parsed {
        source: source.clone(),
        ir: front.ir,
        len_bindings: front.len_bindings,
        requires,
        sites: HashMap::new(),
    };
    let parsed: &'static mut Parsed = Box::leak(Box::new(parsed));
    // the IR does not move any more: number its `over` sites by address
    parsed.sites = ir::visit::over_sites(&parsed.ir.body);
    let parsed: &'static Parsed = parsed;
    let mut kept = kept().lock().unwrap_or_else(PoisonError::into_inner);
    let parsed = *kept.entry(source).or_insert(parsed);
    Ok(TextSchedule { parsed })
}
