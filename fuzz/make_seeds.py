#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/seeds/<target>/.

Small interesting files: LF, CRLF, CR-only, mixed endings, lone CR before LF lines,
no final newline, empty, indentation, UTF-8 with BOM, UTF-16LE/BE and UTF-32 with
BOM, Latin-1 (windows-1252), Shift_JIS, invalid UTF-8. `line_model` gets the raw
files; `jsonscan` gets request lines (LINES below); `edit_engine` gets each file combined with requests in every mode, in the
layout its parser reads:

    mode, flags, line, end_line, opts, content_len u16le, find_len u16le,
    content, find, file...

flags: 0x01 file exists, 0x02 find given, 0x04 find taken from the file's text
(find bytes = char offset, length-1), 0x08 want_diff, 0x10 line given, 0x20 endLine
given, 0x40 line near u64::MAX. end_line: bit 0x80 = line + (low 3 bits), else the
low 7 bits. opts: bits 0-1 bom (1 false, 2 true), bits 2-3 lineEnding (1 lf,
2 crlf), bits 4-7 encoding label index (see LABELS in edit_engine.rs).

Run from the repository root or from fuzz/: python3 fuzz/make_seeds.py
"""

import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u16le(s):
    return b"\xff\xfe" + s.encode("utf-16-le")


def u16be(s):
    return b"\xfe\xff" + s.encode("utf-16-be")


def u32le(s):
    return b"\xff\xfe\x00\x00" + s.encode("utf-32-le")


FILES = {
    "empty": b"",
    "lf": b"alpha\nbeta\ngamma\n",
    "crlf": b"first\r\nsecond\r\nthird\r\n",
    "cr_only": b"one\rtwo\rthree\r",
    "mixed": b"a\r\nb\nc\rd\r\ne",
    "lone_cr_before_lf": b"x\rfoo\n\nbar\r\n",
    "no_final_newline": b"line one\nline two",
    "crlf_no_final": b"p\r\nq\r\nr",
    "indented": b"def f():\n    return 1\n\tif x:\n\t  y = 2\n",
    "utf8_bom_crlf": b"\xef\xbb\xbfcaf\xc3\xa9\r\nna\xc3\xafve\r\n",
    "utf16le_bom": u16le("hello\r\nw\u00f6rld\r\n\U0001F600 end"),
    "utf16be_bom": u16be("a\nb\rc\r\n"),
    "utf32le_bom": u32le("x\ny\n"),
    "latin1": "caf\u00e9\nna\u00efve\r\nd\u00e9j\u00e0 vu\n".encode("cp1252"),
    "shift_jis": "\u65e5\u672c\u8a9e\n\u30c6\u30b9\u30c8\r\n".encode("shift_jis"),
    "invalid_utf8": b"ok\n\xff\xfe bad\n\xc3\n",
    "blank_lines": b"\n\n\r\n\r\r\n",
    "repeats": b"aaa\naa\na\n",
}

# (name, mode, flags, line, end_line, opts, content, find)
WRITE, APPEND, REPLACE, INSERT, DELETE = range(5)
EXISTS, FIND, FIND_FROM_FILE, DIFF, LINE, END = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
REQUESTS = [
    ("write", WRITE, EXISTS, 0, 0, 0, b"new\ntext\n", b""),
    ("write_crlf_utf16", WRITE, EXISTS | DIFF, 0, 0, (2 << 4) | (2 << 2), b"a\nb", b""),
    ("write_latin1", WRITE, 0, 0, 0, 6 << 4, "\u00e9t\u00e9\n".encode(), b""),
    ("append", APPEND, EXISTS, 0, 0, 0, b"tail\nmore", b""),
    ("append_lf_first", APPEND, EXISTS, 0, 0, 0, b"\nz", b""),
    ("create_append", APPEND, 0, 0, 0, 0, b"created\n", b""),
    ("replace_find", REPLACE, EXISTS | FIND | FIND_FROM_FILE, 0, 0, 0, b"R", b"\x02\x03"),
    ("replace_find_break", REPLACE, EXISTS | FIND | FIND_FROM_FILE | DIFF, 0, 0, 0, b"X\nY", b"\x01\x06"),
    ("replace_find_empty", REPLACE, EXISTS | FIND | FIND_FROM_FILE, 0, 0, 0, b"", b"\x02\x03"),
    ("replace_find_literal", REPLACE, EXISTS | FIND, 0, 0, 0, b"Z", b"a"),
    ("replace_line", REPLACE, EXISTS | LINE, 2, 0, 0, b"changed", b""),
    ("replace_line_empty", REPLACE, EXISTS | LINE, 2, 0, 0, b"", b""),
    ("replace_range", REPLACE, EXISTS | LINE | END, 1, 0x80 | 1, 0, b"A\nB\nC\n", b""),
    ("replace_stale", REPLACE, EXISTS | LINE | FIND | FIND_FROM_FILE, 1, 0, 0, b"moved", b"\x0c\x02"),
    ("replace_indent", REPLACE, EXISTS | LINE, 2, 0, 0, b"return 2", b""),
    ("insert", INSERT, EXISTS | LINE, 2, 0, 0, b"ins1\nins2\n", b""),
    ("insert_end", INSERT, EXISTS | LINE, 4, 0, 0, b"last", b""),
    ("delete", DELETE, EXISTS | LINE, 2, 0, 0, b"", b""),
    ("delete_last", DELETE, EXISTS | LINE | END, 2, 0x80 | 3, 0, b"", b""),
    ("line_huge", REPLACE, EXISTS | LINE | 0x40, 0, 0, 0, b"x", b""),
]


# Request lines for `jsonscan`: the shapes the front ends read, and the edges of
# the scan's subset (escapes, surrogates, long integers, floats, repeated names,
# nesting, raw control characters, invalid UTF-8).
LINES = {
    "acp_request": b'{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/tmp/a","content":"a\\nb\\n"}}',
    "mcp_tools_call": b'{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/a","content":"caf\\u00e9 \\ud83d\\ude00\\t\\"q\\"\\\\"},"_meta":{"k":[1,true,null]}}}',
    "notification": b' { "jsonrpc" : "2.0" , "method" : "session/cancel" , "params" : { } } \r\n',
    "repeated_params": b'{"id":2,"params":3,"params":{"arguments":{"a":1}},"method":"m"}',
    "lone_surrogate": b'{"id":-7,"method":"m","params":{"arguments":{"content":"\\ud800x"}}}',
    "escaped_key": b'{"i\\u0064":1,"method":"m"}',
    "big_integer": b'{"id":1234567890123456789,"method":"m"}',
    "float": b'{"id":1.5e3,"method":"m"}',
    "deep": b'{"params":' + b'[' * 70 + b']' * 70 + b'}',
    "raw_control": b'{"method":"a\tb"}',
    "invalid_utf8": b'{"method":"\xff\xfe"}',
    "utf8": "{\"method\":\"\u00e9\u4e2d\U0001f600\",\"id\":0}".encode(),
}


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for fname, data in FILES.items():
        write("line_model", fname, data)
        for rname, mode, flags, line, end, opts, content, find in REQUESTS:
            head = bytes([mode, flags, line, end, opts])
            blob = head + struct.pack("<HH", len(content), len(find)) + content + find + data
            write("edit_engine", f"{fname}-{rname}", blob)
    for lname, data in LINES.items():
        write("jsonscan", lname, data)
    n = len(FILES)
    print(
        f"wrote {n} line_model seeds, {n * len(REQUESTS)} edit_engine seeds"
        f" and {len(LINES)} jsonscan seeds"
    )


if __name__ == "__main__":
    main()
