//! Aligned text tables as the RDMA tools print theirs (perftest,
//! `rdma statistic`): a header line, rows, no borders, text columns
//! left-aligned and figures right-aligned, two blanks between columns.
//! Laid out by comfy-table; the caller names each column's alignment.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, TableStyle};

/// How a column's cells sit: text to the left, figures to the right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Names, kinds, QPs.
    Left,
    /// Counts, times, rates.
    Right,
}

/// A table with `header`'s columns; add rows with [`Columns::row`].
#[derive(Debug)]
pub struct Columns {
    table: Table,
    aligns: Vec<Align>,
}

impl Columns {
    /// The columns, each with its header text and alignment.
    pub fn new(header: &[(&str, Align)]) -> Self {
        let mut table = Table::new();
        // Built without comfy-table's `tty` feature: no terminal queries,
        // the same bytes on a tty, a pipe and a file.
        table.load_style(TableStyle::new()).set_content_arrangement(ContentArrangement::Disabled);
        let aligns: Vec<Align> = header.iter().map(|h| h.1).collect();
        table.set_header(header.iter().map(|(h, a)| cell(h.to_string(), *a)).collect::<Vec<_>>());
        let last = header.len().saturating_sub(1);
        for (i, c) in table.column_iter_mut().enumerate() {
            c.set_padding((0, if i == last { 0 } else { 2 }));
        }
        Columns { table, aligns }
    }

    /// One row, a cell per column.
    pub fn row<I: IntoIterator<Item = String>>(&mut self, cells: I) -> &mut Self {
        let row: Vec<Cell> = cells.into_iter().zip(&self.aligns).map(|(c, a)| cell(c, *a)).collect();
        self.table.add_row(row);
        self
    }

    /// The lines, each after `indent`, trailing blanks trimmed.
    pub fn lines(&self, indent: &str) -> Vec<String> {
        self.table.lines().map(|l| format!("{indent}{}", l.trim_end())).collect()
    }

    /// The lines joined, each ending in a newline.
    pub fn render(&self, indent: &str) -> String {
        self.lines(indent).iter().map(|l| format!("{l}\n")).collect()
    }
}

fn cell(text: String, a: Align) -> Cell {
    Cell::new(text).set_alignment(match a {
        Align::Left => CellAlignment::Left,
        Align::Right => CellAlignment::Right,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_by_kind_with_two_blanks_between() {
        let mut t = Columns::new(&[("QP", Align::Left), ("count", Align::Right)]);
        t.row(["0x000100".to_string(), "4".to_string()]).row(["-".to_string(), "12345678".to_string()]);
        assert_eq!(t.lines("  "), ["  QP           count", "  0x000100         4", "  -         12345678"]);
    }
}
