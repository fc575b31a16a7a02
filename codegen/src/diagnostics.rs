//! Problems found in a contract, collected rather than first-only, and rendered with source
//! context.
//!
//! Every check pushes [`Diagnostic`]s into one [`Diagnostics`]; the caller decides what to do
//! once all checks ran. A diagnostic names the file, where in it (a YAML path such as
//! `queues.orders.retry.max_delay` with its line and column, or a JSON pointer in a schema
//! file), what is wrong and how to fix it.
//!
//! Everything in a diagnostic may come from a hostile file: names, `$ref`s, paths, JSON
//! pointers, quoted values and the source snippet. Rendering ([`Diagnostic`]'s `Display` and
//! [`Diagnostics::render`]) is the one place that escapes them ([`escape`]), so a check
//! builds its message from raw text and no control sequence ever reaches a terminal.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};

use crate::load::LineIndex;

mod code;
mod path;
pub use code::Code;
pub use path::{Segment, YamlPath};

/// Whether `c` must not reach a terminal as written: C0 and C1 control characters (ESC
/// starts terminal commands, CR and BS overwrite what was printed, NUL truncates), DEL, the
/// bidirectional overrides and isolates that reorder the text around them (U+202E, the
/// "Trojan Source" characters), the Unicode line and paragraph separators, and the
/// zero-width and invisible format characters (a soft hyphen, a zero-width space or joiner, a
/// byte-order mark) that make two different names print the same.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{061c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

/// `text` with every [hidden](is_hidden) character written as a visible escape, the way Rust
/// writes it (`\n`, `\t`, `\u{1b}`, `\u{202e}`); everything else stays as written.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, |_, _| false)
}

/// Source text for a snippet: [`escape`], except that line ends (`\n`, `\r\n`) and tabs keep
/// their meaning, so the snippet keeps its lines and columns.
pub fn escape_source(text: &str) -> Cow<'_, str> {
    escape_with(text, |c, next| {
        matches!(c, '\n' | '\t') || (c == '\r' && next == Some('\n'))
    })
}

/// Escapes the hidden characters of `text` for which `keep(char, next char)` is false.
fn escape_with(text: &str, keep: impl Fn(char, Option<char>) -> bool) -> Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let mut out: Option<String> = None;
    let mut at = 0;
    while let Some(c) = chars.next() {
        if is_hidden(c) && !keep(c, chars.peek().copied()) {
            let out = out.get_or_insert_with(|| {
                let mut out = String::with_capacity(text.len() + 8);
                out.push_str(&text[..at]);
                out
            });
            out.extend(c.escape_default());
        } else if let Some(out) = &mut out {
            out.push(c);
        }
        at += c.len_utf8();
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The contract cannot be used until it is fixed.
    Error,
    /// The contract works, but probably not the way its author meant.
    Warning,
}

/// A byte range in a source file, with the line and column (both 1-based) where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first byte.
    pub offset: usize,
    /// Length in bytes (0 for a point).
    pub len: usize,
    /// Line of the first byte, from 1.
    pub line: usize,
    /// Column of the first character, from 1.
    pub column: usize,
}

/// Where in a file a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A node of the contract YAML, by path (`queues.orders.retry`), with its span when the
    /// node is written in the file.
    Yaml {
        /// The path of the node, shown dotted with `[index]` items and quoted keys where a
        /// name could be misread (`queues["orders.retry"]`).
        path: YamlPath,
        /// Where the node is written; `None` when it is not (a default).
        span: Option<Span>,
    },
    /// A node of a schema file, by JSON pointer (`/properties/total/$ref`), with its span
    /// when the file could be indexed.
    Pointer {
        /// The JSON pointer.
        pointer: String,
        /// Where the node is written.
        span: Option<Span>,
    },
    /// A position in a file that could not be parsed into a tree.
    Position(Span),
    /// The file as a whole.
    File,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable kebab-case identifier of the check, such as `unroutable-publisher`.
    pub code: Code,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// The file, as the user would write its path.
    pub file: PathBuf,
    /// Where in the file.
    pub place: Place,
    /// Other places the problem involves, in other files or the same one: the other
    /// declaration of a queue two contracts declare differently, the publisher whose message a
    /// consumer disagrees with. Rendered after the main place, each with its snippet.
    pub related: Vec<Related>,
}

/// Another place a [`Diagnostic`] involves, with what it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    /// The file, as the user would write its path.
    pub file: PathBuf,
    /// Where in the file.
    pub place: Place,
    /// What is at that place, such as "queue `billing` declared here as classic".
    pub label: String,
}

impl Related {
    /// The location as `file:line:column (path)`, with hidden characters [escaped](escape).
    pub fn location(&self) -> String {
        escape(&raw_location(&self.file, &self.place)).into_owned()
    }
}

impl Diagnostic {
    /// An error about `file`.
    pub fn error(code: Code, file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            code,
            message: message.into(),
            help: None,
            file: file.into(),
            place: Place::File,
            related: Vec::new(),
        }
    }

    /// A warning about `file`.
    pub fn warning(code: Code, file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(code, file, message)
        }
    }

    /// Adds how to fix the problem.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets where in the file the problem is.
    pub fn at(mut self, place: Place) -> Self {
        self.place = place;
        self
    }

    /// Adds another place the problem involves, with what is there.
    pub fn also_at(
        mut self,
        file: impl Into<PathBuf>,
        place: Place,
        label: impl Into<String>,
    ) -> Self {
        self.related.push(Related {
            file: file.into(),
            place,
            label: label.into(),
        });
        self
    }

    /// The location as `file:line:column`, followed by the YAML path or JSON pointer, with
    /// hidden characters [escaped](escape).
    pub fn location(&self) -> String {
        escape(&raw_location(&self.file, &self.place)).into_owned()
    }

    fn span(&self) -> Option<Span> {
        self.place.span()
    }
}

impl Place {
    /// Where the place is written, when it is.
    fn span(&self) -> Option<Span> {
        match self {
            Place::Yaml { span, .. } | Place::Pointer { span, .. } => *span,
            Place::Position(span) => Some(*span),
            Place::File => None,
        }
    }

    /// How the place is named in a snippet's label: `at `queues.orders``; empty for a bare
    /// position or a whole file.
    fn label(&self) -> String {
        match self {
            // A path's display is escaped already.
            Place::Yaml { path, .. } => format!("at `{path}`"),
            Place::Pointer { pointer, .. } => format!("at JSON pointer `#{}`", escape(pointer)),
            Place::Position(_) | Place::File => String::new(),
        }
    }
}

/// `file:line:column (path)` of `place` in `file`, unescaped.
fn raw_location(file: &std::path::Path, place: &Place) -> String {
    {
        let file = file.display();
        match place {
            Place::Yaml {
                path,
                span: Some(span),
            } => format!("{file}:{}:{} ({path})", span.line, span.column),
            Place::Yaml { path, span: None } => format!("{file} ({path})"),
            Place::Pointer {
                pointer,
                span: Some(span),
            } => format!("{file}:{}:{} (#{pointer})", span.line, span.column),
            Place::Pointer {
                pointer,
                span: None,
            } => format!("{file}#{pointer}"),
            Place::Position(span) => format!("{file}:{}:{}", span.line, span.column),
            Place::File => file.to_string(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{kind}[{}]: {}: {}",
            self.code,
            self.location(),
            escape(&self.message)
        )?;
        if let Some(help) = &self.help {
            write!(f, " (help: {})", escape(help))?;
        }
        for related in &self.related {
            write!(
                f,
                "; also at {}: {}",
                related.location(),
                escape(&related.label)
            )?;
        }
        Ok(())
    }
}

/// How rendered diagnostics look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RenderStyle {
    /// Unicode frames, no colour: stable text for logs, build output and snapshots.
    #[default]
    Plain,
    /// Unicode frames with ANSI colours, for a terminal.
    Color,
}

/// All problems found in one contract, with the text of the files they point into.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    sources: BTreeMap<PathBuf, Arc<str>>,
}

impl Diagnostics {
    /// An empty collection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a problem.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.items.push(diagnostic);
    }

    /// Keeps the text of `file` so problems in it are shown with source context.
    pub fn add_source(&mut self, file: impl Into<PathBuf>, text: Arc<str>) {
        self.sources.insert(file.into(), text);
    }

    /// The files whose text was kept: the contract and every schema file read before the
    /// problems were found. A build script watches them so a fix anywhere triggers a rerun.
    pub fn files(&self) -> impl Iterator<Item = &std::path::Path> {
        self.sources.keys().map(PathBuf::as_path)
    }

    /// Moves the problems and sources of `other` into `self`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
        self.sources.extend(other.sources);
    }

    /// The same problems without the warnings, every source kept.
    pub(crate) fn into_errors(mut self) -> Self {
        self.items.retain(|d| d.severity == Severity::Error);
        self
    }

    /// Every problem, errors first, then in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter()
    }

    /// Puts errors first and orders each group by file and position, so output is stable.
    pub fn sort(&mut self) {
        self.items.sort_by(|a, b| {
            let offset = |d: &Diagnostic| d.span().map_or(usize::MAX, |s| s.offset);
            (a.severity, &a.file, offset(a), &a.message).cmp(&(
                b.severity,
                &b.file,
                offset(b),
                &b.message,
            ))
        });
        self.items.dedup();
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.items.len() - self.error_count()
    }

    /// True when at least one problem is an error.
    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// True when there is no problem at all.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Renders every problem with source context, followed by a one-line summary.
    pub fn render(&self, style: RenderStyle) -> String {
        let theme = match style {
            RenderStyle::Plain => GraphicalTheme::unicode_nocolor(),
            RenderStyle::Color => GraphicalTheme::unicode(),
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_width(100)
            .with_links(false);
        let mut out = String::new();
        // One line index per file, built on first use: a snippet is then found without
        // scanning the file from its start for every diagnostic.
        let mut lines: BTreeMap<&PathBuf, LineIndex<'_>> = BTreeMap::new();
        for diagnostic in &self.items {
            let report = self.to_report(diagnostic, &mut lines);
            if handler.render_report(&mut out, report.as_ref()).is_err() {
                // Rendering only fails on a broken formatter; fall back to the one-line form.
                out.push_str(&diagnostic.to_string());
            }
            out.push('\n');
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// `2 errors, 1 warning`.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| {
            if n == 1 {
                format!("{n} {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        format!(
            "{}, {}",
            plural(self.error_count(), "error"),
            plural(self.warning_count(), "warning")
        )
    }

    fn to_report<'s>(
        &'s self,
        diagnostic: &'s Diagnostic,
        lines: &mut BTreeMap<&'s PathBuf, LineIndex<'s>>,
    ) -> miette::Report {
        let severity = match diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        };
        let mut report = MietteDiagnostic::new(escape(&diagnostic.message))
            .with_code(format!("warren::{}", diagnostic.code))
            .with_severity(severity);
        if let Some(help) = &diagnostic.help {
            report = report.with_help(escape(help));
        }
        let place = diagnostic.place.label();
        let main = match self.excerpt(&diagnostic.file, &diagnostic.place, lines) {
            Some((excerpt, span)) => {
                let label = if place.is_empty() {
                    "here".to_owned()
                } else {
                    place
                };
                report = report.with_label(LabeledSpan::new_with_span(Some(label), span));
                miette::Report::new(report).with_source_code(excerpt)
            }
            // No source kept, or a line too long to show (a minified or machine-made file):
            // the headline's line and column say where instead.
            None => {
                let mut headline =
                    format!("{}: {}", diagnostic.location(), escape(&diagnostic.message));
                if !place.is_empty() && matches!(diagnostic.place, Place::Yaml { .. }) {
                    headline = format!("{headline} ({place})");
                }
                report.message = headline;
                miette::Report::new(report)
            }
        };
        if diagnostic.related.is_empty() {
            return main;
        }
        let related = diagnostic
            .related
            .iter()
            .map(|related| self.related_report(related, lines))
            .collect();
        miette::Report::new(WithRelated { main, related })
    }

    /// A related place as an advice of its own, with its snippet, under its main report.
    fn related_report<'s>(
        &'s self,
        related: &'s Related,
        lines: &mut BTreeMap<&'s PathBuf, LineIndex<'s>>,
    ) -> miette::Report {
        let mut report = MietteDiagnostic::new(format!(
            "{}: {}",
            related.location(),
            escape(&related.label)
        ))
        .with_severity(miette::Severity::Advice);
        match self.excerpt(&related.file, &related.place, lines) {
            Some((excerpt, span)) => {
                let label = related.place.label();
                let label = if label.is_empty() {
                    "here".to_owned()
                } else {
                    label
                };
                report = report.with_label(LabeledSpan::new_with_span(Some(label), span));
                miette::Report::new(report).with_source_code(excerpt)
            }
            None => miette::Report::new(report),
        }
    }

    /// The excerpt of `file` around `place`, when its text was kept and the lines are short
    /// enough to show.
    fn excerpt<'s>(
        &'s self,
        file: &'s PathBuf,
        place: &Place,
        lines: &mut BTreeMap<&'s PathBuf, LineIndex<'s>>,
    ) -> Option<(Excerpt, SourceSpan)> {
        let span = place.span()?;
        let (file, text) = self.sources.get_key_value(file)?;
        let index = lines.entry(file).or_insert_with(|| LineIndex::new(text));
        Excerpt::around(text, index, span, file)
    }
}

/// A report followed by the reports of its related places, which miette renders after it
/// (each with its own file's snippet).
#[derive(Debug)]
struct WithRelated {
    main: miette::Report,
    related: Vec<miette::Report>,
}

impl fmt::Display for WithRelated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.main, f)
    }
}

impl std::error::Error for WithRelated {}

impl miette::Diagnostic for WithRelated {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.main.code()
    }

    fn severity(&self) -> Option<miette::Severity> {
        self.main.severity()
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.main.help()
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.main.source_code()
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.main.labels()
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.related
                .iter()
                .map(|r| r.as_ref() as &dyn miette::Diagnostic),
        ))
    }
}

/// The longest source line shown in a snippet, in bytes.
const MAX_SNIPPET_LINE: usize = 400;

/// Lines of context shown above and below a snippet's span (miette's default).
const CONTEXT_LINES: usize = 1;

/// The few lines of a source file around one span, [escaped](escape_source), as the source
/// code of one report. miette scans a source from its start to find a span's lines, so handing
/// it the whole file costs the file's length per diagnostic; an excerpt costs its own.
#[derive(Debug)]
struct Excerpt {
    /// The file's name, escaped.
    name: String,
    /// The escaped lines.
    text: String,
    /// The 0-based line number of the excerpt's first line in the file.
    first_line: usize,
}

impl Excerpt {
    /// The excerpt of `text` around `span`, and the span within it; `None` when a line of the
    /// span is too long to show.
    fn around(
        text: &str,
        lines: &LineIndex<'_>,
        span: Span,
        file: &std::path::Path,
    ) -> Option<(Self, SourceSpan)> {
        let start = floor_boundary(text, span.offset);
        let end = floor_boundary(text, span.offset.saturating_add(span.len)).max(start);
        let first = lines.line_of(start);
        let last = lines.line_of(end);
        if (first..=last).any(|line| lines.line_len(line) > MAX_SNIPPET_LINE) {
            return None;
        }
        // Context lines only when they are short enough too.
        let mut from = first;
        while from > first.saturating_sub(CONTEXT_LINES)
            && lines.line_len(from - 1) <= MAX_SNIPPET_LINE
        {
            from -= 1;
        }
        let mut to = last;
        while to < last.saturating_add(CONTEXT_LINES)
            && to + 1 < lines.line_count()
            && lines.line_len(to + 1) <= MAX_SNIPPET_LINE
        {
            to += 1;
        }
        let window_start = lines.line_start(from);
        let window_end = lines.line_end(to);
        let before = escape_source(&text[window_start..start]);
        let inside = escape_source(&text[start..end]);
        let after = escape_source(&text[end..window_end]);
        let excerpt = Self {
            name: escape(&file.display().to_string()).into_owned(),
            text: format!("{before}{inside}{after}"),
            first_line: from,
        };
        Some((excerpt, SourceSpan::new(before.len().into(), inside.len())))
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner =
            self.text
                .as_str()
                .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line().saturating_add(self.first_line),
            inner.column(),
            inner.line_count(),
        )))
    }
}

/// `offset` clamped to `text` and moved back to a character boundary.
fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(RenderStyle::Plain))
    }
}

impl std::error::Error for Diagnostics {}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}
