//! The glob engine of approval patterns and config rules.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    /// `*`: any run of characters (including none and including `/`).
    Star,
    /// `?`: exactly one character.
    One,
    /// A literal character (`\x` for any `x`, or any other character).
    Lit(char),
}

/// A compiled glob over a whole string: `*` matches any run of characters
/// (`/` included), `?` exactly one character, `\` makes the next character
/// literal (a trailing `\` is a literal backslash); every other character,
/// `[`, `]`, `{` and `}` included, matches only itself. Case-sensitive.
///
/// Matching costs at most O(pattern length x text length) (one backtrack
/// point, no recursion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    toks: Vec<Tok>,
}

impl Glob {
    /// Compiles `pattern` (never fails: every string is a glob).
    pub fn new(pattern: &str) -> Glob {
        let mut toks = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                // `**` means the same as `*`; one token keeps matching linear.
                '*' if toks.last() == Some(&Tok::Star) => {}
                '*' => toks.push(Tok::Star),
                '?' => toks.push(Tok::One),
                '\\' => toks.push(Tok::Lit(chars.next().unwrap_or('\\'))),
                c => toks.push(Tok::Lit(c)),
            }
        }
        Glob { toks }
    }

    /// The one string this glob matches, when it has no `*` or `?`
    /// (escapes removed), else `None`.
    pub fn literal(&self) -> Option<String> {
        self.toks
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Some(*c),
                Tok::Star | Tok::One => None,
            })
            .collect()
    }

    /// Whether the glob matches all of `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        self.matches_chars(&t)
    }

    pub(super) fn matches_chars(&self, t: &[char]) -> bool {
        let p = &self.toks;
        let (mut pi, mut ti) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some(Tok::Star) => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(Tok::One) => {
                    pi += 1;
                    ti += 1;
                }
                Some(Tok::Lit(c)) if *c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    // Let the last `*` swallow one more character.
                    Some((sp, st)) => {
                        star = Some((sp, st + 1));
                        pi = sp + 1;
                        ti = st + 1;
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|t| *t == Tok::Star)
    }
}

/// Glob match of `pattern` over the whole of `text` (see [`Glob`]).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    Glob::new(pattern).is_match(text)
}

/// `text` as a glob that matches exactly `text`: `*`, `?` and `\` get a `\`
/// in front. For a person or host building a pattern around a path
/// (`escape_glob("/h/id_rsa*") + "*"`); approving one file needs no pattern
/// at all (approve its `command`).
pub fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::METACHARS;

    #[test]
    fn glob() {
        assert!(glob_match("edit_file *", "edit_file write /a/b"));
        assert!(glob_match("edit_file ? /a/*", "edit_file w /a/b/c"));
        assert!(!glob_match("edit_file write /a/*", "edit_file edit /a/b"));
        assert!(glob_match("*.pem", "x.pem"));
        assert!(!glob_match("*.pem", "x.pem.bak"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
        assert!(glob_match("a**b", "axxb"));
        assert!(glob_match("*a*b*", "zzazzbzz"));
        assert!(!glob_match("*a*b*", "zzbzzazz"));
    }

    #[test]
    fn glob_escapes_and_literal_brackets() {
        // `\` makes the next character literal.
        assert!(glob_match(r"/h/a\*", "/h/a*"));
        assert!(!glob_match(r"/h/a\*", "/h/abc"));
        assert!(glob_match(r"/h/a\?", "/h/a?"));
        assert!(!glob_match(r"/h/a\?", "/h/ab"));
        assert!(glob_match(r"/h/a\\b", r"/h/a\b"));
        assert!(
            glob_match(r"/h/a\", r"/h/a\"),
            "a trailing backslash is literal"
        );
        // Brackets and braces are plain characters.
        assert!(glob_match("/h/[ab]", "/h/[ab]"));
        assert!(!glob_match("/h/[ab]", "/h/a"));
        assert!(glob_match("/h/{a,b}", "/h/{a,b}"));
        assert!(!glob_match("/h/{a,b}", "/h/a"));
        // escape_glob turns any text into a glob matching only that text.
        for c in METACHARS {
            let name = format!("/h/x{c}y{c}");
            let g = Glob::new(&escape_glob(&name));
            assert!(g.is_match(&name), "{name}");
            assert_eq!(g.literal().as_deref(), Some(name.as_str()), "{name}");
            assert!(!g.is_match("/h/xzyz"), "{name}");
        }
        assert_eq!(Glob::new("a*").literal(), None);
        assert_eq!(Glob::new(r"a\*").literal().as_deref(), Some("a*"));
    }

    #[test]
    fn glob_on_long_adversarial_text_stays_linear_enough() {
        // One backtrack point: a many-star pattern against a long text that
        // almost matches finishes (no exponential blow-up). Correctness only;
        // nothing is timed.
        let text = format!("edit_file write /{}", "a".repeat(4000));
        let pat = format!("{}b", "*a".repeat(50));
        assert!(!glob_match(&pat, &text));
        assert!(glob_match(&format!("{}*", "*a".repeat(50)), &text));
    }
}
