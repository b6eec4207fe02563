//! A line diff (longest common subsequence) for failure reports: `-` expected,
//! `+` actual, two lines of context around each change.

/// The diff of two texts, line by line; empty when they are equal.
pub fn lines(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    if a == b {
        return String::new();
    }
    // lcs[i][j] = length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT).min(ops.len() - 1);
        (lo..=hi).any(|m| ops[m].0 != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if *op == ' ' && !near_change(k) {
            if !skipped {
                out.push_str("  ...\n");
                skipped = true;
            }
            continue;
        }
        skipped = false;
        out.push(*op);
        out.push(' ');
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn marks_changes() {
        let d = super::lines("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d, "  a\n- b\n+ B\n  c\n");
        assert_eq!(super::lines("x", "x"), "");
    }
}
