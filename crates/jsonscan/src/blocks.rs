//! The two loops over a long string's bytes, 16 bytes at a time on
//! `x86_64` (SSE2, which every `x86_64` CPU has), byte by byte elsewhere:
//! finding where a string scan must stop, and moving the runs between
//! escapes while unescaping in place. For the 5 MiB content of a write,
//! with an escaped line break every 70 bytes, they take the scan from
//! 0.9-1.4 ms to 0.64 ms and the unescape from 1.1-2.0 ms to 0.74-0.9 ms
//! (docs/decisions/0022-large-reads-and-writes.md): the escapes are handled
//! inside the loop, not one library call each. The scan goes 64 bytes at a
//! time past the escapes of one byte ([`skip_string`]): a 5 MiB request
//! line then crosses the pipe 0.2 ms sooner, its strings checked as it
//! arrives (docs/decisions/0037-the-format-a-write-left.md).

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

/// Bytes [`skip_string`] looks at together.
#[cfg(target_arch = "x86_64")]
const WIDE: usize = 64;

/// [`string_stop`] that skips the escapes of one byte (`\n` above all,
/// and `\"`, `\\`, `\/`, `\b`, `\f`, `\r`, `\t`), setting `escaped`
/// for them, instead of stopping at each: on `x86_64` 64 bytes at a time,
/// with the stops of the block in a mask, so that text with an escaped line
/// break every 70 bytes is not scanned again from each escape. Stops at a
/// string's closing quote, a raw control character, and a backslash that
/// starts another escape (`\u`, an invalid one, or one whose second byte is
/// not in `b`); near the end of `b` it may also stop at a one-byte escape,
/// as [`string_stop`] does (the caller handles those as well). `None` when
/// there is no stop in `b` from `i`. `wide` as for [`string_stop`].
pub(crate) fn skip_string(
    b: &[u8],
    i: usize,
    wide: &mut bool,
    escaped: &mut bool,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    let i = match skip_blocks(b, i, wide, escaped) {
        Ok(stop) => return Some(stop),
        Err(rest) => rest,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = escaped;
    string_stop(b, i, wide)
}

/// [`skip_string`]'s blocks of 64 bytes: `Ok` with where it stopped, or
/// `Err` with where the bytes left are fewer than a block.
#[cfg(target_arch = "x86_64")]
fn skip_blocks(
    b: &[u8],
    mut i: usize,
    wide: &mut bool,
    escaped: &mut bool,
) -> Result<usize, usize> {
    'blocks: while let Some(block) = b.get(i..).and_then(<[u8]>::first_chunk::<WIDE>) {
        let (mut stops, backslashes, high) = masks(block);
        *wide |= high != 0;
        while stops != 0 {
            let t = stops.trailing_zeros() as usize;
            if backslashes & (1 << t) == 0 {
                // A quote or a control character.
                return Ok(i + t);
            }
            match b.get(i + t + 1) {
                Some(&e) if crate::one_byte_escape(e).is_some() => {
                    *escaped = true;
                    if t + 2 >= WIDE {
                        i += t + 2;
                        continue 'blocks;
                    }
                    // The escape's two bytes are done with.
                    stops &= !0u64 << (t + 2);
                }
                _ => return Ok(i + t),
            }
        }
        i += WIDE;
    }
    Err(i)
}

/// The masks of a block of 64 bytes, a bit per byte: where a string scan
/// stops ([`stops`]), where a backslash is, and where a byte is not ASCII.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks(block: &[u8; WIDE]) -> (u64, u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of x86_64; each unaligned load reads 16 of the
    // 64 bytes of `block`, which it borrows (`_mm_loadu_si128` needs no
    // alignment).
    unsafe {
        #[allow(clippy::cast_ptr_alignment)] // read only with unaligned loads
        let p = block.as_ptr().cast::<__m128i>();
        let quote = _mm_set1_epi8(b'"'.cast_signed());
        let backslash = _mm_set1_epi8(b'\\'.cast_signed());
        let low = _mm_set1_epi8(0x1f_u8.cast_signed());
        let one = |v| {
            let b = _mm_cmpeq_epi8(v, backslash);
            let any = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), b),
                _mm_cmpeq_epi8(_mm_max_epu8(v, low), low),
            );
            // `movemask` sets the low 16 bits of its `i32` only.
            let bits = |m: i32| u64::from(m.cast_unsigned() & 0xffff);
            (
                bits(_mm_movemask_epi8(any)),
                bits(_mm_movemask_epi8(b)),
                bits(_mm_movemask_epi8(v)),
            )
        };
        let (s0, b0, h0) = one(_mm_loadu_si128(p));
        let (s1, b1, h1) = one(_mm_loadu_si128(p.add(1)));
        let (s2, b2, h2) = one(_mm_loadu_si128(p.add(2)));
        let (s3, b3, h3) = one(_mm_loadu_si128(p.add(3)));
        (
            s0 | s1 << 16 | s2 << 32 | s3 << 48,
            b0 | b1 << 16 | b2 << 32 | b3 << 48,
            h0 | h1 << 16 | h2 << 32 | h3 << 48,
        )
    }
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
    use proptest::prelude::*;

    /// Scans the string text of `t` from `i` to its end as a byte-by-byte
    /// loop does: the first stop that is not an escape of one byte, and
    /// whether one was skipped; or, with `skip`, the same with the scan
    /// made of `skip_string` calls, the one-byte escapes it stops at
    /// skipped as its callers skip them.
    fn scan(t: &[u8], mut i: usize, skip: bool) -> (Option<usize>, bool) {
        let mut escaped = false;
        loop {
            let stop = if skip {
                let mut wide = false;
                skip_string(t, i, &mut wide, &mut escaped)
            } else {
                t[i..].iter().position(|&c| stops(c)).map(|k| i + k)
            };
            let Some(stop) = stop else {
                return (None, escaped);
            };
            match t.get(stop + 1) {
                Some(&e) if t[stop] == b'\\' && crate::one_byte_escape(e).is_some() => {
                    escaped = true;
                    i = stop + 2;
                }
                _ => return (Some(stop), escaped),
            }
        }
    }

    /// Each escape, a quote, a raw control byte and a lone final
    /// backslash at every offset around the first two block edges.
    #[test]
    fn skipping_escapes_stops_where_a_byte_by_byte_scan_stops_at_every_block_edge() {
        let pieces: [&[u8]; 8] = [
            b"\\n",
            b"\\\\",
            b"\\\"",
            b"\\u00e9",
            b"\\x",
            b"\"",
            b"\t",
            "é".as_bytes(),
        ];
        for at in 0..140 {
            for from in [0, 1, 63] {
                for piece in pieces {
                    let mut t = vec![b'a'; 200];
                    t.splice(at..at + piece.len(), piece.iter().copied());
                    assert_eq!(
                        scan(&t, from, true),
                        scan(&t, from, false),
                        "{piece:?} at {at} from {from}"
                    );
                }
                // Two escapes in a row, across the edge.
                let mut two = vec![b'a'; 200];
                two.splice(at..at + 4, b"\\n\\n".iter().copied());
                assert_eq!(
                    scan(&two, from, true),
                    scan(&two, from, false),
                    "twice at {at}"
                );
                // A backslash as the last byte.
                let mut cut = vec![b'a'; at + 1];
                cut[at] = b'\\';
                assert_eq!(
                    scan(&cut, from.min(at), true),
                    scan(&cut, from.min(at), false),
                    "cut at {at}"
                );
            }
        }
    }

    proptest! {
        /// However escapes, quotes, control and wide bytes fall in and
        /// across the 64-byte blocks, the scan stops where a byte-by-byte
        /// one does, and says whether it skipped an escape.
        #[test]
        fn skipping_escapes_stops_where_a_byte_by_byte_scan_stops(
            parts in proptest::collection::vec(
                prop_oneof![
                    6 => Just(&b"abcdefgh"[..]),
                    3 => Just(&b"\\n"[..]),
                    1 => Just(&b"\\\\"[..]),
                    1 => Just(&b"\\\""[..]),
                    1 => Just(&b"\\u00e9"[..]),
                    1 => Just(&b"\\x"[..]),
                    1 => Just(&b"\""[..]),
                    1 => Just(&b"\t"[..]),
                    1 => Just("é".as_bytes()),
                    1 => Just(&b"\\"[..]),
                ],
                0..64,
            ),
            from in 0usize..16,
        ) {
            let t = parts.concat();
            let i = from.min(t.len());
            prop_assert_eq!(scan(&t, i, true), scan(&t, i, false));
            let mut wide = false;
            let mut escaped = false;
            let stop = skip_string(&t, i, &mut wide, &mut escaped);
            if t[i..stop.unwrap_or(t.len())].iter().any(|&c| c >= 0x80) {
                prop_assert!(wide);
            }
        }
    }

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
