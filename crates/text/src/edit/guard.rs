//! The guard of SPEC 8.5: re-reads the new units and checks that the edit
//! changed nothing outside its range.

use super::plan::signed;
use crate::encoding::Unit;
use crate::error::TextError;
use crate::lines::count_range;
use crate::repr::BodyUnits;

/// The guard of SPEC 8.5. `orig` are the original units, `new` the units re-read from
/// the new bytes (`new_tail` stray bytes after them); the edit replaced `orig[a..b]`
/// with `n` units and meant to change the line-break count by `delta`.
///
/// Checks: the units before `a` and after the edit are identical; every original line
/// wholly before the edit and wholly after it is, after re-splitting, the same line
/// (text and ending, shifted by the size change); the line-break count changed by
/// exactly `delta`.
///
/// It needs no line lists, because the line model is local: a unit ends a line break
/// exactly when it is `\n`, or a `\r` whose next unit is not `\n`, and the kind of
/// the break depends on the unit before. So once the units before `a` and after the
/// edit are known to be identical:
/// - a line wholly before the edit can change only if the lone `\r` ending it at
///   `a - 1` now meets a `\n` at `a`, and a line wholly after it (or starting where
///   the new units end on a break) only if a `\r` just before it now meets the `\n`
///   it starts with: a `\r` and a `\n` joining at a boundary of the edit, which is
///   checked directly;
/// - the break counts of the two texts can differ only over the edit and one unit
///   either side, so the change is counted there (in time and memory independent of
///   the file's size).
pub(super) fn guard<O: UnitView + ?Sized, N: UnitView + ?Sized>(
    orig: &O,
    new: &N,
    new_tail: usize,
    a: usize,
    b: usize,
    n: usize,
    delta: isize,
) -> Result<(), TextError> {
    let fail = |why: String| Err(TextError::Guard(why));
    if new_tail != 0 {
        return fail("the new bytes end inside a code unit".into());
    }
    if a > b || b > orig.len() || new.len() + b != orig.len() + a + n {
        return fail("the new text does not have the expected length".into());
    }
    if !same_units(orig, 0, new, 0, a) {
        return fail("the text before the edit changed".into());
    }
    if !same_units(orig, b, new, a + n, orig.len() - b) {
        return fail("the text after the edit changed".into());
    }
    // A `\r` and a `\n` joining into one ending at either boundary of the edit. (With
    // nothing removed and nothing added, the texts are identical.)
    let joins = |p: usize| p > 0 && p < new.len() && new.at(p - 1) == CR && new.at(p) == LF;
    if (n > 0 && joins(a)) || ((n > 0 || b > a) && joins(a + n)) {
        return fail(
            "the edit would join a lone \\r and a following \\n into one \\r\\n ending, changing a line it does not touch"
                .into(),
        );
    }
    // The breaks whose last unit lies in the edit or one unit either side: outside
    // that window both texts agree unit for unit, neighbours included.
    let lo = a.saturating_sub(1);
    let before = breaks_within(orig, lo, (b + 1).min(orig.len()));
    let after = breaks_within(new, lo, (a + n + 1).min(new.len()));
    let got = signed(after) - signed(before);
    if got != delta {
        return fail(format!(
            "the edit changed the number of line breaks by {got}, expected {delta}"
        ));
    }
    Ok(())
}

const CR: u32 = 0x0D;
const LF: u32 = 0x0A;

/// What the guard reads of a text: its code units by index, and the units as bytes
/// when a unit is a byte (so ranges compare with `memcmp` and breaks are counted
/// vectorised).
pub(super) trait UnitView {
    fn len(&self) -> usize;
    fn at(&self, i: usize) -> u32;
    fn byte_units(&self) -> Option<&[u8]>;
}

impl<U: Unit> UnitView for [U] {
    fn len(&self) -> usize {
        <[U]>::len(self)
    }
    fn at(&self, i: usize) -> u32 {
        self[i].into()
    }
    fn byte_units(&self) -> Option<&[u8]> {
        U::as_bytes(self)
    }
}

impl<U: Unit> UnitView for Vec<U> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn at(&self, i: usize) -> u32 {
        self[i].into()
    }
    fn byte_units(&self) -> Option<&[u8]> {
        U::as_bytes(self)
    }
}

impl UnitView for BodyUnits<'_> {
    fn len(&self) -> usize {
        BodyUnits::len(self)
    }
    fn at(&self, i: usize) -> u32 {
        BodyUnits::at(self, i)
    }
    fn byte_units(&self) -> Option<&[u8]> {
        self.as_bytes()
    }
}

/// Whether `len` units of `x` from `xi` equal those of `y` from `yi` (in range).
fn same_units<X: UnitView + ?Sized, Y: UnitView + ?Sized>(
    x: &X,
    xi: usize,
    y: &Y,
    yi: usize,
    len: usize,
) -> bool {
    match (x.byte_units(), y.byte_units()) {
        (Some(x), Some(y)) => x[xi..xi + len] == y[yi..yi + len],
        _ => (0..len).all(|k| x.at(xi + k) == y.at(yi + k)),
    }
}

/// The line breaks whose last unit lies in `lo..hi` of `v` (see `count_range`).
pub(super) fn breaks_within<V: UnitView + ?Sized>(v: &V, lo: usize, hi: usize) -> usize {
    match v.byte_units() {
        Some(bytes) => count_range(bytes, lo, hi).breaks(),
        None => (lo..hi)
            .filter(|&q| {
                let u = v.at(q);
                u == LF || (u == CR && (q + 1 == v.len() || v.at(q + 1) != LF))
            })
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::find::{is_cr, is_lf};
    use crate::lines::count_units;
    use crate::repr::Repr;

    fn units(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn guard_accepts_a_clean_line_edit() {
        let o = units("a\r\nb\r\nc\r\n");
        let n = units("a\r\nX\r\nc\r\n");
        assert!(guard(&o, &n, 0, 3, 4, 1, 0).is_ok());
    }

    #[test]
    fn guard_refuses_a_merged_crlf() {
        // "a\r" + inserted "\nb": the inserted LF joins the old CR into one ending.
        let o = units("a\rc\n");
        let n = units("a\r\nbc\n");
        let err = guard(&o, &n, 0, 2, 2, 2, 1).unwrap_err();
        assert!(matches!(err, TextError::Guard(_)), "{err:?}");
    }

    #[test]
    fn guard_refuses_a_changed_prefix_or_wrong_delta() {
        let o = units("a\nb\nc\n");
        let n = units("A\nB\nc\n");
        assert!(guard(&o, &n, 0, 2, 3, 1, 0).is_err());
        // The data-loss bug of seed 000: the whole file replaced by one line.
        let n = units("FIRST");
        assert!(guard(&units("first\r\nsecond\r\n"), &n, 0, 0, 5, 5, 0).is_err());
        // A wrong break count.
        let o = units("a\nb\n");
        let n = units("a\nx\ny\n");
        assert!(guard(&o, &n, 0, 2, 3, 3, 0).is_err());
        assert!(guard(&o, &n, 0, 2, 3, 3, 1).is_ok());
    }

    #[test]
    fn guard_refuses_a_stray_tail() {
        let o: Vec<u16> = vec![0x61];
        assert!(guard(&o, &o, 1, 0, 0, 0, 0).is_err());
    }

    /// The guard as first written, splitting both texts into line lists: the
    /// reference the list-free guard must agree with.
    #[allow(clippy::too_many_arguments)]
    fn reference_guard<U: Unit>(
        orig: &[U],
        new: &[U],
        new_tail: usize,
        a: usize,
        b: usize,
        n: usize,
        delta: isize,
    ) -> Result<(), TextError> {
        use crate::lines::{count_breaks, split_units};
        let fail = |why: String| Err(TextError::Guard(why));
        if new_tail != 0 {
            return fail("the new bytes end inside a code unit".into());
        }
        if a > b || b > orig.len() || new.len() + b != orig.len() + a + n {
            return fail("the new text does not have the expected length".into());
        }
        if new[..a] != orig[..a] {
            return fail("the text before the edit changed".into());
        }
        if new[a + n..] != orig[b..] {
            return fail("the text after the edit changed".into());
        }
        let joins = |p: usize| p > 0 && p < new.len() && is_cr(new[p - 1]) && is_lf(new[p]);
        if (n > 0 && joins(a)) || ((n > 0 || b > a) && joins(a + n)) {
            return fail(
                "the edit would join a lone \\r and a following \\n into one \\r\\n ending, changing a line it does not touch"
                    .into(),
            );
        }
        let old_lines = split_units(orig);
        let new_lines = split_units(new);
        let pre = old_lines
            .iter()
            .take_while(|l| l.ending.is_some() && l.end <= a)
            .count();
        for (i, old) in old_lines.iter().take(pre).enumerate() {
            if new_lines.get(i) != Some(old) {
                return fail(format!("line {} before the edit changed", i + 1));
            }
        }
        let ins_ends_line =
            a + n == 0 || (n > 0 && (is_lf(new[a + n - 1]) || is_cr(new[a + n - 1])));
        let suf = old_lines
            .iter()
            .rev()
            .take_while(|l| l.start > b || (l.start == b && ins_ends_line))
            .count();
        if suf > new_lines.len() {
            return fail("lines after the edit are missing".into());
        }
        let shift = signed(a + n) - signed(b);
        let moved = |x: usize| x.checked_add_signed(shift);
        for j in 1..=suf {
            let o = old_lines[old_lines.len() - j];
            let m = new_lines[new_lines.len() - j];
            if Some(m.start) != moved(o.start)
                || Some(m.text_end) != moved(o.text_end)
                || Some(m.end) != moved(o.end)
                || m.ending != o.ending
            {
                return fail(format!(
                    "line {} after the edit changed",
                    old_lines.len() - j + 1
                ));
            }
        }
        let got = signed(count_breaks(&new_lines)) - signed(count_breaks(&old_lines));
        if got != delta {
            return fail(format!(
                "the edit changed the number of line breaks by {got}, expected {delta}"
            ));
        }
        Ok(())
    }

    fn breaky(max: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let unit = prop_oneof![
            3 => Just(b'\n'),
            3 => Just(b'\r'),
            3 => Just(b'a'),
        ];
        prop::collection::vec(unit, 0..max)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2048,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any replacement of `orig[a..b]`, sometimes with a damaged prefix or suffix,
        /// a stray tail or a wrong expected count: both guards decide alike, with the
        /// same reason.
        #[test]
        fn guard_agrees_with_the_line_list_guard(
            orig in breaky(24),
            ins in breaky(5),
            cut in (0usize..25, 0usize..25),
            damage in proptest::option::weighted(0.15, (0usize..40, proptest::sample::select(vec![b'\n', b'\r', b'a']))),
            tail in proptest::option::weighted(0.05, 1usize..3),
            off in proptest::sample::select(vec![0isize, 0, 0, 1, -1]),
        ) {
            let (a, b) = (cut.0.min(cut.1).min(orig.len()), cut.0.max(cut.1).min(orig.len()));
            let mut new = [&orig[..a], &ins[..], &orig[b..]].concat();
            if let Some((at, byte)) = damage
                && !new.is_empty()
            {
                let at = at % new.len();
                new[at] = byte;
            }
            let truth = signed(count_units(&new).breaks()) - signed(count_units(&orig).breaks());
            let tail = tail.unwrap_or(0);
            let delta = truth + off;
            let got = guard(&orig, &new, tail, a, b, ins.len(), delta);
            let want = reference_guard(&orig, &new, tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            // Also at units of 16 bits.
            let wide = |v: &[u8]| v.iter().map(|&x| u16::from(x)).collect::<Vec<u16>>();
            let got = guard(&wide(&orig), &wide(&new), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            // As the engine calls it: the original read in place from its bytes (here
            // UTF-16BE and UTF-8), the new text as units.
            let be: Vec<u8> = wide(&orig).iter().flat_map(|u| u.to_be_bytes()).collect();
            let in_place = crate::repr::Utf16Repr { be: true }.body_units(&be);
            let got = guard(&in_place, wide(&new).as_slice(), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            let in_place = crate::repr::Utf8Repr.body_units(&orig);
            let got = guard(&in_place, new.as_slice(), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(got, want);
        }
    }
}
