//! Line and column positions to byte offsets.

use crate::diagnostics::Span;

/// The byte offset of every line start of a text.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

/// Where the last [`LineIndex::point_after`] landed, so the next one on the same line
/// continues from there instead of counting the line's characters again.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    line: usize,
    column: usize,
    offset: usize,
}

/// How a parser counts columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    /// Characters from the start of the line (YAML parsers).
    Chars,
    /// Bytes from the start of the line (serde_json).
    Bytes,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// The number of lines (a text without a newline has one).
    pub(crate) fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// The 0-based line that holds byte `offset` (the last line past the end).
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|start| *start <= offset)
            .saturating_sub(1)
    }

    /// The byte offset where 0-based `line` starts (the text's end past the last line).
    pub(crate) fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.text.len())
    }

    /// The byte offset where 0-based `line` ends, before its `\n` or `\r\n`.
    pub(crate) fn line_end(&self, line: usize) -> usize {
        let Some(next) = self.starts.get(line.saturating_add(1)) else {
            return self.text.len();
        };
        let end = next.saturating_sub(1);
        if self.text[..end].ends_with('\r') {
            end - 1
        } else {
            end
        }
    }

    /// The length in bytes of 0-based `line`, without its line end.
    pub(crate) fn line_len(&self, line: usize) -> usize {
        self.line_end(line).saturating_sub(self.line_start(line))
    }

    /// The byte offset of 1-based `line` and 0-based `column`, clamped to the text and to a
    /// character boundary, so a parser's odd position never panics.
    pub(crate) fn offset(&self, line: usize, column: usize, unit: Column) -> usize {
        let Some(&start) = self.starts.get(line.saturating_sub(1)) else {
            return self.text.len();
        };
        let rest = &self.text[start..];
        let within = match unit {
            Column::Chars => rest
                .char_indices()
                .nth(column)
                .map_or(rest.len(), |(i, _)| i),
            Column::Bytes => {
                let mut i = column.min(rest.len());
                while !rest.is_char_boundary(i) {
                    i -= 1;
                }
                i
            }
        };
        start + within
    }

    /// A zero-length span at byte `offset` (on a character boundary).
    pub(crate) fn at(&self, offset: usize) -> Span {
        let line = self.starts.partition_point(|start| *start <= offset).max(1);
        let start = self.starts[line - 1];
        let column = self.text[start..offset.min(self.text.len()).max(start)]
            .chars()
            .count();
        self.point(line, column, Column::Chars)
    }

    /// [`LineIndex::point`] in characters, continuing from `cursor` when it is on the same
    /// line at or before `column`. A parser reports positions in order, so indexing a
    /// document costs its length, where counting from each line's start cost the square of a
    /// long line's (a schema file is often one line).
    pub(crate) fn point_after(&self, cursor: &mut Cursor, line: usize, column: usize) -> Span {
        let Some(&start) = self.starts.get(line.saturating_sub(1)) else {
            return self.point(line, column, Column::Chars);
        };
        let (mut at, mut offset) =
            if cursor.line == line && cursor.column <= column && cursor.offset >= start {
                (cursor.column, cursor.offset)
            } else {
                (0, start)
            };
        // Like `nth(column)` from the line's start: past the text's end, the end.
        for c in self.text[offset..].chars() {
            if at == column {
                break;
            }
            offset += c.len_utf8();
            at += 1;
        }
        *cursor = Cursor {
            line,
            column: at,
            offset,
        };
        Span {
            offset,
            len: 0,
            line,
            column: at + 1,
        }
    }

    /// A zero-length span at 1-based `line` and 0-based `column`.
    pub(crate) fn point(&self, line: usize, column: usize, unit: Column) -> Span {
        let offset = self.offset(line, column, unit);
        let line_start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(offset);
        Span {
            offset,
            len: 0,
            line,
            column: self.text[line_start.min(offset)..offset].chars().count() + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Column, LineIndex};

    #[test]
    fn columns_in_chars_or_bytes_land_on_the_same_byte() {
        let text = "ab\n\"é\": x\n";
        let lines = LineIndex::new(text);
        assert_eq!(lines.offset(2, 3, Column::Chars), 7);
        assert_eq!(lines.offset(2, 4, Column::Bytes), 7);
        // Inside a multibyte character: back to its start, never a panic.
        assert_eq!(lines.offset(2, 2, Column::Bytes), 4);
        assert_eq!(lines.offset(9, 0, Column::Chars), text.len());
        assert_eq!(lines.point(2, 4, Column::Bytes).column, 4);
    }

    #[test]
    fn points_after_a_cursor_are_points() {
        let text = "ab\n\"é\": x\nlast";
        let lines = LineIndex::new(text);
        let mut cursor = super::Cursor::default();
        // In order, backwards, across lines and past the end, as parsers may report them.
        for (line, column) in [
            (1, 0),
            (1, 2),
            (2, 1),
            (2, 4),
            (2, 2),
            (1, 1),
            (3, 9),
            (9, 0),
        ] {
            assert_eq!(
                lines.point_after(&mut cursor, line, column),
                lines.point(line, column, Column::Chars),
                "{line}:{column}"
            );
        }
    }
}
