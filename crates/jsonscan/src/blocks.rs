//! The two loops over a long string's bytes, 16 bytes at a time on
//! `x86_64` (SSE2, which every `x86_64` CPU has), byte by byte elsewhere:
//! finding where a string scan must stop, and moving the runs between
//! escapes while unescaping in place. For the 5 MiB content of a write,
//! with an escaped line break every 70 bytes, they take the scan from
//! 0.9-1.4 ms to 0.64 ms and the unescape from 1.1-2.0 ms to 0.74-0.9 ms
//! (docs/decisions/0022-large-reads-and-writes.md): the escapes are handled
//! inside the loop, not one library call each.

/// Bytes looked at together.
#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 16;

/// Whether a string scan stops at `c`: its closing quote, an escape, or a
/// raw control character (which JSON does not allow in a string).
#[inline]
fn stops(c: u8) -> bool {
    c < 0x20 || c == b'"' || c == b'\\'
}

/// The index of the first byte at or after `i` at which a string scan
/// stops (see [`stops`]); `None` when there is none. Sets `wide` when a
/// byte at or after `i` that is not ASCII was seen: every one before the
/// stop, perhaps some after it (more is only a needless UTF-8 check).
pub(crate) fn string_stop(b: &[u8], mut i: usize, wide: &mut bool) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut high = 0;
        while let Some(block) = b.get(i..i + BLOCK) {
            // SAFETY: SSE2 is part of x86_64; the unaligned load reads the
            // 16 bytes of `block`, which it borrows.
            let (stop, h) = unsafe {
                let v = _mm_loadu_si128(block.as_ptr().cast());
                let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"'.cast_signed()));
                let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\'.cast_signed()));
                // `max(v, 0x1f) == 0x1f` exactly for the bytes below 0x20.
                let low = _mm_set1_epi8(0x1f_u8.cast_signed());
                let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
                let any = _mm_or_si128(_mm_or_si128(quote, backslash), control);
                (_mm_movemask_epi8(any), _mm_movemask_epi8(v))
            };
            high |= h;
            if stop != 0 {
                *wide |= high != 0;
                return Some(i + stop.trailing_zeros() as usize);
            }
            i += BLOCK;
        }
        *wide |= high != 0;
    }
    for (k, &c) in b.get(i..)?.iter().enumerate() {
        if stops(c) {
            return Some(i + k);
        }
        *wide |= c >= 0x80;
    }
    None
}

/// For unescaping in place (`v[..w]` written, `v[r..end]` still to read,
/// at least one block between them, `w + 16 <= r`): moves the text a block
/// at a time and writes the one-byte escapes (`\n` above all) on the way,
/// until a `\u` escape, or fewer than 16 bytes are left. Returns the new
/// `(r, w)`, and whether every block moved was ASCII. A block is stored
/// whole at `w`, its bytes after an escape overwritten later: it never
/// reaches `r`, since the gap only grows.
#[cfg(target_arch = "x86_64")]
pub(crate) fn move_runs(
    v: &mut [u8],
    mut r: usize,
    mut w: usize,
    end: usize,
) -> (usize, usize, bool) {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    debug_assert!(w + BLOCK <= r);
    let mut high = 0;
    while r + BLOCK <= end {
        let mut block = [0u8; BLOCK];
        block.copy_from_slice(&v[r..r + BLOCK]);
        v[w..w + BLOCK].copy_from_slice(&block);
        // SAFETY: SSE2 is part of x86_64; the unaligned load reads the 16
        // bytes of `block`, a local array.
        let (escapes, h) = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            (
                _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\'.cast_signed()))),
                _mm_movemask_epi8(x),
            )
        };
        high |= h;
        if escapes == 0 {
            r += BLOCK;
            w += BLOCK;
            continue;
        }
        let k = escapes.trailing_zeros() as usize;
        r += k;
        w += k;
        let Some(c) = v.get(r + 1).and_then(|&e| crate::one_byte_escape(e)) else {
            break;
        };
        v[w] = c;
        w += 1;
        r += 2;
    }
    (r, w, high == 0)
}

/// Elsewhere the caller's own loop does all the work.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn move_runs(_v: &mut [u8], r: usize, w: usize, _end: usize) -> (usize, usize, bool) {
    (r, w, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_where_a_byte_by_byte_scan_stops() {
        let mut texts: Vec<Vec<u8>> = vec![Vec::new(), b"\"".to_vec(), "é".as_bytes().to_vec()];
        for at in 0..40 {
            for stop in [b'"', b'\\', 0, 0x1f, b'\n'] {
                let mut t = vec![b'a'; 40];
                t[at] = stop;
                texts.push(t.clone());
                t[at / 2] = 0xc3;
                texts.push(t);
            }
        }
        texts.push(vec![b'x'; 100]);
        for t in &texts {
            for i in 0..=t.len() {
                let mut wide = false;
                let got = string_stop(t, i, &mut wide);
                let want = t[i..].iter().position(|&c| stops(c)).map(|k| i + k);
                assert_eq!(got, want, "{t:?} from {i}");
                let before = &t[i..want.unwrap_or(t.len())];
                if before.iter().any(|&c| c >= 0x80) {
                    assert!(wide, "{t:?} from {i}");
                }
                if !t[i..].iter().any(|&c| c >= 0x80) {
                    assert!(!wide, "{t:?} from {i}");
                }
            }
        }
    }
}
