//! Redis's glob patterns for `SCAN ... MATCH` and `KEYS`: `*`, `?`,
//! `[abc]`, `[^abc]`, `[a-z]` and `\` escapes, matched byte by byte.

/// Whether `text` matches `pattern`. Runs in O(pattern × text) at worst:
/// on a mismatch it only goes back to the last `*`, so patterns with many
/// stars cannot blow up.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently covers up to.
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, t));
            p += 1;
            continue;
        }
        if p < pattern.len() {
            let (ok, next) = element(pattern, p, text[t]);
            if ok {
                p = next;
                t += 1;
                continue;
            }
        }
        match backtrack {
            Some((star, covered)) => {
                p = star + 1;
                t = covered + 1;
                backtrack = Some((star, covered + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Whether the pattern element at `p` (not a `*`) matches `byte`, and where
/// the next element starts.
fn element(pattern: &[u8], p: usize, byte: u8) -> (bool, usize) {
    match pattern[p] {
        b'?' => (true, p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == byte, p + 2),
        b'[' => class(pattern, p + 1, byte),
        literal => (literal == byte, p + 1),
    }
}

/// A `[...]` class starting after its `[`. An unclosed class runs to the
/// end of the pattern, as in Redis.
fn class(pattern: &[u8], mut p: usize, byte: u8) -> (bool, usize) {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut found = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            found |= pattern[p + 1] == byte;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (lo, hi) = (
                pattern[p].min(pattern[p + 2]),
                pattern[p].max(pattern[p + 2]),
            );
            found |= (lo..=hi).contains(&byte);
            p += 3;
        } else {
            found |= pattern[p] == byte;
            p += 1;
        }
    }
    // Past the `]` (or at the end of an unclosed class).
    (found != negated, (p + 1).min(pattern.len()))
}

/// The bytes every match starts with: the pattern up to its first special
/// character. A scan seeks there and stops once keys leave the prefix.
pub fn literal_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(pattern.len());
    &pattern[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_in_redis() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h*llo", "hellox", false),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:age", false),
            (
                "a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
            ("*x", "abcx", true),
            ("", "", true),
            ("", "a", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                *expected,
                "{pattern} against {text}"
            );
        }
    }

    #[test]
    fn literal_prefix_stops_at_the_first_special_character() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"abc"), b"abc");
        assert_eq!(literal_prefix(b"a?c"), b"a");
        assert_eq!(literal_prefix(b"*"), b"");
    }
}
