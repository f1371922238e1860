//! The lines program peers log (`env.log`, and their SDK's console warnings and errors), as a
//! world keeps them: each cut to a bound, so a program that logs a payload cannot fill a
//! trace or a report with it.

/// The longest program line kept, in bytes; a longer one is cut at a character boundary and
/// ends in `…`, so a program that logs a payload cannot fill a trace with it.
pub const MAX_LINE_BYTES: usize = 2000;

/// `text` cut to [`MAX_LINE_BYTES`].
pub(crate) fn cut_line(mut text: String) -> String {
    if text.len() > MAX_LINE_BYTES {
        let mut end = MAX_LINE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_program_line_is_cut_at_a_character_boundary() {
        assert_eq!(cut_line("short".into()), "short");
        // 'é' is two bytes: the cut falls inside one and moves back to its start.
        let long = format!("a{}", "é".repeat(MAX_LINE_BYTES));
        let cut = cut_line(long);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= MAX_LINE_BYTES + '…'.len_utf8());
        assert_eq!(cut.trim_end_matches('…').len(), MAX_LINE_BYTES - 1);
    }
}
