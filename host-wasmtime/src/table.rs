//! The `rota` command's tables: comfy-table without borders, so that columns line up
//! in a terminal, a pipe and a test alike.

use comfy_table::{CellAlignment, Table};

/// A table without borders or lines; cells padded by one space.
pub(crate) fn plain() -> Table {
    let mut table = Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table
}

/// Right-aligns the given columns (numbers).
pub(crate) fn align_right(table: &mut Table, columns: &[usize]) {
    for &index in columns {
        if let Some(column) = table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// The table's text, without the padding that ends its lines.
pub(crate) fn render(table: &Table) -> String {
    table
        .lines()
        .map(|line| line.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
