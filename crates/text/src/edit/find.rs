//! Finding `find` in a file's code units: its text pieces and line breaks, and
//! every place they match.

use crate::encoding::Unit;
use crate::error::TextError;
use crate::lines::iter_bytes;
use crate::repr::Repr;

/// A piece of `find`: text (already encoded) or a line break matching any ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok<U> {
    Text(Vec<U>),
    Break,
}

/// Splits `find` into text pieces and line breaks; `Ok(None)` when `find` holds a
/// character the file's encoding cannot hold (so it can occur nowhere).
pub(super) fn tokenize<R: Repr>(r: &R, find: &str) -> Result<Option<Vec<Tok<R::U>>>, TextError> {
    let mut toks = Vec::new();
    for l in iter_bytes(find.as_bytes()) {
        let text = &find[l.text()];
        if !text.is_empty() {
            match r.encode(text) {
                Ok(units) => toks.push(Tok::Text(units)),
                Err(TextError::UnmappableCharacter(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        if l.ending.is_some() {
            toks.push(Tok::Break);
        }
    }
    Ok(Some(toks))
}

pub(super) fn is_cr<U: Unit>(u: U) -> bool {
    u.into() == 0x0D
}

pub(super) fn is_lf<U: Unit>(u: U) -> bool {
    u.into() == 0x0A
}

/// The start positions of `pat` in `hay`, overlapping ones included, in increasing
/// order and found lazily (no list): `memchr::memmem` for bytes, KMP for 16/32-bit
/// units.
fn occurrence_iter<'a, U: Unit>(
    hay: &'a [U],
    pat: &'a [U],
) -> Box<dyn Iterator<Item = usize> + 'a> {
    let m = pat.len();
    if m == 0 || m > hay.len() {
        return Box::new(std::iter::empty());
    }
    if let (Some(hay), Some(pat)) = (U::as_bytes(hay), U::as_bytes(pat)) {
        let finder = memchr::memmem::Finder::new(pat);
        let mut at = 0;
        // Resuming one unit after each hit keeps overlapping occurrences.
        return Box::new(std::iter::from_fn(move || {
            let i = at + finder.find(hay.get(at..)?)?;
            at = i + 1;
            Some(i)
        }));
    }
    let mut fail = vec![0usize; m];
    let mut k = 0;
    for i in 1..m {
        while k > 0 && pat[i] != pat[k] {
            k = fail[k - 1];
        }
        if pat[i] == pat[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut k = 0;
    let mut units = hay.iter().enumerate();
    Box::new(std::iter::from_fn(move || {
        for (i, &c) in units.by_ref() {
            while k > 0 && c != pat[k] {
                k = fail[k - 1];
            }
            if c == pat[k] {
                k += 1;
            }
            if k == m {
                k = fail[k - 1];
                return Some(i + 1 - m);
            }
        }
        None
    }))
}

/// The end of a match of `toks` starting at `p`, if there is one. A break token
/// consumes a whole ending (`\r\n` together), and a match never starts between `\r`
/// and `\n`.
fn match_at<U: Unit>(hay: &[U], p: usize, toks: &[Tok<U>]) -> Option<usize> {
    if p > 0 && p < hay.len() && is_cr(hay[p - 1]) && is_lf(hay[p]) {
        return None;
    }
    let mut i = p;
    for t in toks {
        match t {
            Tok::Text(v) => {
                if hay.get(i..i + v.len())? != v.as_slice() {
                    return None;
                }
                i += v.len();
            }
            Tok::Break => {
                let u = *hay.get(i)?;
                if is_cr(u) {
                    i += 1;
                    if hay.get(i).is_some_and(|&n| is_lf(n)) {
                        i += 1;
                    }
                } else if is_lf(u) {
                    i += 1;
                } else {
                    return None;
                }
            }
        }
    }
    Some(i)
}

/// Every (start, end) match of `toks` in `hay` (overlapping included), in increasing
/// order of start and found lazily, both ends on character boundaries when `bounds`
/// is given.
pub(super) fn matches<'a, U: Unit>(
    hay: &'a [U],
    toks: &'a [Tok<U>],
    bounds: Option<&'a [bool]>,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let candidates: Box<dyn Iterator<Item = usize> + 'a> = match toks.first() {
        None => Box::new(std::iter::empty()),
        Some(Tok::Text(v)) => occurrence_iter(hay, v),
        // A break token starts at every ending: a `\r`, or a `\n` not after a `\r`.
        Some(Tok::Break) => match U::as_bytes(hay) {
            Some(h) => Box::new(
                memchr::memchr2_iter(b'\r', b'\n', h)
                    .filter(move |&p| h[p] == b'\r' || p == 0 || h[p - 1] != b'\r'),
            ),
            None => Box::new((0..hay.len()).filter(move |&p| {
                is_cr(hay[p]) || (is_lf(hay[p]) && (p == 0 || !is_cr(hay[p - 1])))
            })),
        },
    };
    candidates
        .filter_map(move |p| match_at(hay, p, toks).map(|e| (p, e)))
        .filter(move |&(s, e)| bounds.is_none_or(|b| b[s] && b[e]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All start positions of `pat` in `hay`, overlapping ones included.
    fn occurrences<U: Unit>(hay: &[U], pat: &[U]) -> Vec<usize> {
        occurrence_iter(hay, pat).collect()
    }

    /// [`matches`], collected.
    fn find_all<U: Unit>(
        hay: &[U],
        toks: &[Tok<U>],
        bounds: Option<&[bool]>,
    ) -> Vec<(usize, usize)> {
        matches(hay, toks, bounds).collect()
    }

    #[test]
    fn occurrences_overlap() {
        assert_eq!(occurrences(b"aaa", b"aa"), vec![0, 1]);
        assert_eq!(occurrences(b"abcabc", b"c"), vec![2, 5]);
        assert_eq!(occurrences(b"ab", b"abc"), Vec::<usize>::new());
    }

    #[test]
    fn break_tokens_match_any_ending_but_never_split_crlf() {
        let r = crate::repr::Utf8Repr;
        let toks = tokenize(&r, "a\nb").unwrap().unwrap();
        for hay in ["a\nb", "a\r\nb", "a\rb"] {
            assert_eq!(find_all(hay.as_bytes(), &toks, None).len(), 1, "{hay:?}");
        }
        let toks = tokenize(&r, "\nb").unwrap().unwrap();
        assert_eq!(find_all(b"a\r\nb", &toks, None), vec![(1, 4)]);
        let toks = tokenize(&r, "a\n\nb").unwrap().unwrap();
        assert!(find_all(b"a\r\nb", &toks, None).is_empty());
    }
}
