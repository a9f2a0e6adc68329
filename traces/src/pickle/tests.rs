//! Reader and writer tests. Byte strings are hand-assembled or were produced
//! by CPython 3.11's `pickle.dumps` (noted where so).

use std::path::PathBuf;
use std::sync::Arc;

use super::doc::ReadOptions;
use super::*;

/// `b` read as a stream of short reads, under `opts`.
/// Reads of 1, 2, 3, 5, 8, 13, 64 and 1,000 bytes in turn, so that the
/// read crosses its window's end inside opcodes, arguments and text lines.
fn read_streamed(b: &[u8], opts: &ReadOptions) -> Result<PickleDoc, PickleError> {
    const SIZES: &[usize] = &[1, 2, 3, 5, 8, 13, 64, 1000];
    let input = reader::PickleInput::Reader(Box::new(crate::ShortReads::new(b, SIZES)));
    reader::parse_input(input, opts)
}

/// A streamed read answers as the slice read: the same value, or the same
/// error.
fn assert_stream_equal(b: &[u8], opts: &ReadOptions) {
    let slice = PickleDoc::from_slice_with(b, opts);
    let stream = read_streamed(b, opts);
    match (&slice, &stream) {
        (Ok(x), Ok(y)) => {
            assert_eq!(x.root().to_value(), y.root().to_value(), "{b:?}");
            assert_eq!(x.bytes_read(), y.bytes_read(), "{b:?}");
        }
        _ => assert_eq!(slice.err(), stream.err(), "{b:?}"),
    }
}

fn read(b: &[u8]) -> PickleDoc {
    PickleDoc::from_slice(b).unwrap_or_else(|e| panic!("{e} reading {b:?}"))
}

fn err(b: &[u8]) -> PickleError {
    match PickleDoc::from_slice(b) {
        Ok(d) => panic!("expected an error for {b:?}, got {:?}", d.root()),
        Err(e) => e,
    }
}

fn root_i64(b: &[u8]) -> i64 {
    read(b)
        .root()
        .as_i64()
        .unwrap_or_else(|| panic!("not an int: {b:?}"))
}

fn root_str(b: &[u8]) -> String {
    read(b)
        .root()
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("not a str: {b:?}"))
}

// `small = [1, 7]` and friends, dumped by CPython with each protocol:
// {'a': [1, -2, 3.5, None, True, False, 'é', (1, 2), (1, 2, 3, 4), 2**70, -(2**70)],
//  'b': {'c': 'x y'}, 'k': 'a\\b\n', 's1': shared, 's2': shared}
// with shared = [7, 'frame'] (one list object referenced twice).
const SMALL_P0: &[u8] = b"(dp0\nVa\np1\n(lp2\nI1\naI-2\naF3.5\naNaI01\naI00\naV\xe9\np3\na(I1\nI2\ntp4\na(I1\nI2\nI3\nI4\ntp5\naL1180591620717411303424L\naL-1180591620717411303424L\nasVb\np6\n(dp7\nVc\np8\nVx y\np9\nssVk\np10\nVa\\u005cb\\u000a\np11\nsVs1\np12\n(lp13\nI7\naVframe\np14\nasVs2\np15\ng13\ns.";
const SMALL_P1: &[u8] = b"}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00NI01\nI00\nX\x02\x00\x00\x00\xc3\xa9q\x03(K\x01K\x02tq\x04(K\x01K\x02K\x03K\x04tq\x05L1180591620717411303424L\nL-1180591620717411303424L\neX\x01\x00\x00\x00bq\x06}q\x07X\x01\x00\x00\x00cq\x08X\x03\x00\x00\x00x yq\x09sX\x01\x00\x00\x00kq\nX\x04\x00\x00\x00a\\b\nq\x0bX\x02\x00\x00\x00s1q\x0c]q\x0d(K\x07X\x05\x00\x00\x00frameq\x0eeX\x02\x00\x00\x00s2q\x0fh\x0du.";
const SMALL_P2: &[u8] = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00N\x88\x89X\x02\x00\x00\x00\xc3\xa9q\x03K\x01K\x02\x86q\x04(K\x01K\x02K\x03K\x04tq\x05\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00@\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xc0eX\x01\x00\x00\x00bq\x06}q\x07X\x01\x00\x00\x00cq\x08X\x03\x00\x00\x00x yq\x09sX\x01\x00\x00\x00kq\nX\x04\x00\x00\x00a\\b\nq\x0bX\x02\x00\x00\x00s1q\x0c]q\x0d(K\x07X\x05\x00\x00\x00frameq\x0eeX\x02\x00\x00\x00s2q\x0fh\x0du.";
// The same plus 'by': b'xy', 'fs': frozenset([1]), 'st': {2},
// 'ba': bytearray(b'q'), protocol 5.
const SMALL_P5: &[u8] = b"\x80\x05\x95\xb1\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00N\x88\x89\x8c\x02\xc3\xa9\x94K\x01K\x02\x86\x94(K\x01K\x02K\x03K\x04t\x94\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00@\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xc0e\x8c\x01b\x94}\x94\x8c\x01c\x94\x8c\x03x y\x94s\x8c\x01k\x94\x8c\x04a\\b\n\x94\x8c\x02s1\x94]\x94(K\x07\x8c\x05frame\x94e\x8c\x02s2\x94h\x0d\x8c\x02by\x94C\x02xy\x94\x8c\x02fs\x94(K\x01\x91\x94\x8c\x02st\x94\x8f\x94(K\x02\x90\x8c\x02ba\x94\x96\x01\x00\x00\x00\x00\x00\x00\x00q\x94u.";

fn check_small(doc: &PickleDoc) {
    let root = doc.root();
    let d = root.as_dict().expect("dict");
    let a = root.get("a").and_then(|v| v.as_list()).expect("a");
    assert_eq!(a.len(), 11);
    assert_eq!(a.get(0).and_then(|v| v.as_i64()), Some(1));
    assert_eq!(a.get(1).and_then(|v| v.as_i64()), Some(-2));
    assert_eq!(a.get(2).and_then(|v| v.as_f64()), Some(3.5));
    assert!(a.get(3).is_some_and(|v| v.is_none()));
    assert_eq!(a.get(4).and_then(|v| v.as_bool()), Some(true));
    assert_eq!(a.get(5).and_then(|v| v.as_bool()), Some(false));
    assert_eq!(a.get(6).and_then(|v| v.as_str()), Some("é"));
    let t2 = a.get(7).and_then(|v| v.as_tuple()).expect("tuple");
    assert_eq!(
        t2.iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>(),
        [1, 2]
    );
    let t4 = a.get(8).and_then(|v| v.as_tuple()).expect("tuple");
    assert_eq!(t4.len(), 4);
    assert_eq!(a.get(9).and_then(|v| v.as_i128()), Some(1i128 << 70));
    assert_eq!(a.get(10).and_then(|v| v.as_i128()), Some(-(1i128 << 70)));
    assert_eq!(a.get(9).map(|v| v.type_name()), Some("int"));
    assert_eq!(
        root.get("b")
            .and_then(|b| b.get("c"))
            .and_then(|v| v.as_str()),
        Some("x y")
    );
    assert_eq!(root.get("k").and_then(|v| v.as_str()), Some("a\\b\n"));
    let s1 = root.get("s1").expect("s1");
    let s2 = root.get("s2").expect("s2");
    assert_eq!(s1.node_id(), s2.node_id(), "memoized list must stay shared");
    assert!(s1.node_id().is_some());
    assert!(s1.same_object(&s2));
    assert_eq!(s1.index(1).and_then(|v| v.as_str()), Some("frame"));
    assert!(d.len() >= 5);
}

#[test]
fn cpython_protocols_0_to_5() {
    for (p, bytes) in [(0, SMALL_P0), (1, SMALL_P1), (2, SMALL_P2), (5, SMALL_P5)] {
        let doc = read(bytes);
        check_small(&doc);
        assert_eq!(doc.bytes_read(), bytes.len(), "protocol {p}");
        assert_eq!(doc.protocol(), if p >= 2 { Some(p) } else { None });
    }
    let doc = read(SMALL_P5);
    let root = doc.root();
    assert_eq!(root.get("by").and_then(|v| v.as_bytes()), Some(&b"xy"[..]));
    assert_eq!(root.get("by").map(|v| v.type_name()), Some("bytes"));
    let fs = root.get("fs").and_then(|v| v.as_set()).expect("frozenset");
    assert!(fs.contains_int(1));
    assert_eq!(root.get("fs").map(|v| v.type_name()), Some("frozenset"));
    let st = root.get("st").and_then(|v| v.as_set()).expect("set");
    assert!(st.contains_int(2) && !st.contains_int(1));
    assert_eq!(root.get("st").map(|v| v.type_name()), Some("set"));
    let ba = root.get("ba").expect("bytearray");
    assert_eq!(ba.as_bytes(), Some(&b"q"[..]));
    assert_eq!(ba.type_name(), "bytearray");
}

#[test]
fn scalar_opcodes() {
    assert!(read(b"N.").root().is_none());
    assert_eq!(read(b"\x88.").root().as_bool(), Some(true));
    assert_eq!(read(b"\x89.").root().as_bool(), Some(false));
    // INT (text), including the protocol-0 bools.
    assert_eq!(root_i64(b"I42\n."), 42);
    assert_eq!(root_i64(b"I-7\n."), -7);
    assert_eq!(read(b"I01\n.").root().as_bool(), Some(true));
    assert_eq!(read(b"I00\n.").root().as_bool(), Some(false));
    assert_eq!(
        read(b"I123456789012345678901234567890\n.")
            .root()
            .as_big_int()
            .map(|b| b.to_string()),
        Some("123456789012345678901234567890".to_owned())
    );
    // LONG (text, with or without the Python 2 'L').
    assert_eq!(root_i64(b"L42L\n."), 42);
    assert_eq!(root_i64(b"L42\n."), 42);
    let big = read(b"L-9223372036854775809L\n.");
    assert_eq!(big.root().as_i64(), None);
    assert_eq!(big.root().as_i128(), Some(-9223372036854775809));
    // BININT, BININT1, BININT2.
    assert_eq!(root_i64(b"J\xff\xff\xff\xff."), -1);
    assert_eq!(root_i64(b"J\x00\x00\x00\x80."), i64::from(i32::MIN));
    assert_eq!(root_i64(b"K\xff."), 255);
    assert_eq!(root_i64(b"M\x00\x01."), 256);
    // LONG4.
    assert_eq!(root_i64(b"\x8b\x02\x00\x00\x00\xff\x7f."), 32767);
    assert_eq!(root_i64(b"\x8b\x00\x00\x00\x00."), 0);
    // BINFLOAT (big-endian) and FLOAT (text).
    assert_eq!(
        read(b"G?\xf8\x00\x00\x00\x00\x00\x00.").root().as_f64(),
        Some(1.5)
    );
    assert_eq!(read(b"F1.5\n.").root().as_f64(), Some(1.5));
    assert_eq!(read(b"F-1e+100\n.").root().as_f64(), Some(-1e100));
    assert!(read(b"Fnan\n.").root().as_f64().unwrap().is_nan());
    assert_eq!(read(b"F1.5\n.").root().type_name(), "float");
    // as_f64 converts ints; as_i64 does not convert floats or bools.
    assert_eq!(read(b"K\x02.").root().as_f64(), Some(2.0));
    assert_eq!(read(b"F2.0\n.").root().as_i64(), None);
    assert_eq!(read(b"\x88.").root().as_i64(), None);
    assert_eq!(read(b"J\xff\xff\xff\xff.").root().as_u64(), None);
}

#[test]
fn long1_sizes() {
    // 0 bytes = 0.
    assert_eq!(root_i64(b"\x8a\x00."), 0);
    // 8 bytes: i64::MAX and i64::MIN stay plain ints.
    assert_eq!(
        root_i64(b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."),
        i64::MAX
    );
    assert_eq!(
        root_i64(b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."),
        i64::MIN
    );
    // 9 bytes, 2**63 (CPython's encoding): a big int, readable as u64.
    let doc = read(b"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.");
    let v = doc.root();
    assert_eq!(v.as_i64(), None);
    assert_eq!(v.as_u64(), Some(1u64 << 63));
    assert_eq!(v.type_name(), "int");
    assert!(matches!(v.view(), View::BigInt(_)));
    // 9 bytes, -2**63 - 1.
    let doc = read(b"\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff.");
    assert_eq!(doc.root().as_i128(), Some(-(1i128 << 63) - 1));
    assert_eq!(doc.root().as_u64(), None);
    // 9 bytes that fit i64 (redundant sign byte): a plain int.
    assert_eq!(
        root_i64(b"\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff."),
        -1
    );
    assert_eq!(
        root_i64(b"\x8a\x09\x05\x00\x00\x00\x00\x00\x00\x00\x00."),
        5
    );
    // 2**64 = CPython's pickle.dumps(2**64, protocol=2).
    let doc = read(b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.");
    assert_eq!(doc.root().as_u64(), None);
    assert_eq!(doc.root().as_i128(), Some(1i128 << 64));
    assert_eq!(doc.root().as_f64(), Some(18446744073709551616.0));
    // 255 bytes: huge, no panic, exact.
    let mut b = vec![0x8a, 0xff];
    b.extend(std::iter::repeat_n(0u8, 254));
    b.push(0x40);
    b.push(b'.');
    let big = read(&b).root().as_big_int().expect("int");
    assert_eq!(big.as_signed_le_bytes().len(), 255);
    assert!(!big.is_negative());
    // 2**2038 has 614 digits and starts 3155957624 (CPython).
    let text = big.to_string();
    assert_eq!((text.len(), &text[..10]), (614, "3155957624"));
}

#[test]
fn string_opcodes() {
    assert_eq!(root_str(b"\x8c\x03abc."), "abc");
    assert_eq!(root_str(b"X\x02\x00\x00\x00\xc3\xa9."), "é");
    assert_eq!(root_str(b"\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi."), "hi");
    // UNICODE: raw-unicode-escape text.
    assert_eq!(root_str(b"V\\u00e9x\\u000a\n."), "éx\n");
    assert_eq!(root_str(b"V\xe9\n."), "é");
    // Invalid UTF-8 (e.g. a lone surrogate written with surrogatepass)
    // becomes U+FFFD.
    assert_eq!(
        root_str(b"X\x03\x00\x00\x00\xed\xa0\x80."),
        "\u{fffd}\u{fffd}\u{fffd}"
    );
    // Python 2 strings: Latin-1.
    assert_eq!(root_str(b"T\x03\x00\x00\x00abc."), "abc");
    assert_eq!(root_str(b"U\x02\xe9a."), "éa");
    assert_eq!(root_str(b"S'a\\nb'\n."), "a\nb");
    assert_eq!(root_str(b"S\"it's\"\n."), "it's");
    assert_eq!(root_str(b"S'\\x41\\101'\n."), "AA");
    assert!(matches!(
        err(b"Sabc\n."),
        PickleError::InvalidArgument { .. }
    ));
    assert!(matches!(
        err(b"S'abc\"\n."),
        PickleError::InvalidArgument { .. }
    ));
    // Bytes.
    let bytes = |b: &[u8]| read(b).root().as_bytes().map(<[u8]>::to_vec);
    assert_eq!(bytes(b"C\x02ab."), Some(b"ab".to_vec()));
    assert_eq!(bytes(b"B\x02\x00\x00\x00ab."), Some(b"ab".to_vec()));
    assert_eq!(
        bytes(b"\x8e\x02\x00\x00\x00\x00\x00\x00\x00ab."),
        Some(b"ab".to_vec())
    );
    assert_eq!(
        bytes(b"\x96\x01\x00\x00\x00\x00\x00\x00\x00z."),
        Some(b"z".to_vec())
    );
    assert_eq!(read(b"C\x00.").root().len(), Some(0));
}

#[test]
fn container_opcodes() {
    // EMPTY_LIST + APPEND / APPENDS.
    let doc = read(b"]K\x01aK\x02a.");
    let l = doc.root().as_list().unwrap();
    assert_eq!(
        l.iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>(),
        [1, 2]
    );
    let doc = read(b"](K\x01K\x02e(K\x03e(e.");
    assert_eq!(doc.root().len(), Some(3));
    // LIST, TUPLE, TUPLE1/2/3, EMPTY_TUPLE.
    assert_eq!(
        read(b"(K\x01K\x02l.").root().as_list().map(|l| l.len()),
        Some(2)
    );
    assert_eq!(read(b"(l.").root().as_list().map(|l| l.len()), Some(0));
    assert_eq!(
        read(b"(K\x01K\x02t.").root().as_tuple().map(|l| l.len()),
        Some(2)
    );
    assert_eq!(read(b").").root().as_tuple().map(|l| l.len()), Some(0));
    assert_eq!(
        read(b"K\x01\x85.").root().as_tuple().map(|l| l.len()),
        Some(1)
    );
    assert_eq!(
        read(b"K\x01K\x02\x86.").root().as_tuple().map(|l| l.len()),
        Some(2)
    );
    let doc = read(b"K\x01K\x02K\x03\x87.");
    let t = doc.root().as_seq().unwrap();
    assert_eq!(
        t.iter()
            .rev()
            .map(|v| v.as_i64().unwrap())
            .collect::<Vec<_>>(),
        [3, 2, 1]
    );
    assert_eq!(doc.root().type_name(), "tuple");
    assert!(doc.root().as_list().is_none());
    // DICT, EMPTY_DICT + SETITEM / SETITEMS.
    let doc = read(b"(\x8c\x01aK\x01\x8c\x01bK\x02d.");
    assert_eq!(doc.root().get("b").and_then(|v| v.as_i64()), Some(2));
    let doc = read(b"}\x8c\x01aK\x01s.");
    assert_eq!(doc.root().get("a").and_then(|v| v.as_i64()), Some(1));
    let doc = read(b"}(\x8c\x01aK\x01\x8c\x01bK\x02uK\x03K\x04s.");
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(d.get_int(3).and_then(|v| v.as_i64()), Some(4));
    assert_eq!(d.get("zz").map(|v| v.is_none()), None);
    let keys: Vec<String> = d.keys().map(|k| format!("{k:?}")).collect();
    assert_eq!(keys, ["\"a\"", "\"b\"", "3"]);
    let vals: Vec<i64> = d.values().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(vals, [1, 2, 4]);
    assert_eq!(d.iter().count(), 3);
    assert_eq!(doc.root().type_name(), "dict");
    // EMPTY_SET + ADDITEMS (duplicates collapse), FROZENSET.
    let doc = read(b"\x8f(K\x01K\x02K\x01\x90(\x8c\x01x\x90.");
    let s = doc.root().as_set().unwrap();
    assert_eq!(s.len(), 3);
    assert!(s.contains_str("x") && s.contains_int(2) && !s.contains_str("y"));
    let doc = read(b"(K\x01K\x01\x88\x91.");
    assert_eq!(doc.root().as_set().map(|s| s.len()), Some(1), "1 == True");
    assert_eq!(doc.root().type_name(), "frozenset");
}

#[test]
fn stack_opcodes() {
    // POP drops the top.
    assert_eq!(root_i64(b"K\x01K\x020."), 1);
    // POP with nothing above the mark drops the mark (as CPython does).
    assert_eq!(root_i64(b"K\x01(0."), 1);
    // POP_MARK drops everything down to the mark.
    assert_eq!(root_i64(b"K\x01(K\x02K\x031."), 1);
    // DUP.
    let doc = read(b"]2K\x01a\x86.");
    let t = doc.root().as_tuple().unwrap();
    assert_eq!(t.get(0).unwrap().node_id(), t.get(1).unwrap().node_id());
    assert_eq!(t.get(1).unwrap().len(), Some(1));
    // PROTO and FRAME.
    let doc = read(b"\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.");
    assert_eq!(doc.root().as_i64(), Some(7));
    assert_eq!(doc.protocol(), Some(4));
    // Data after STOP is ignored.
    let doc = read(b"K\x07.garbage");
    assert_eq!(doc.bytes_read(), 3);
}

#[test]
fn memo_opcodes_share() {
    // PUT / GET (text).
    let doc = read(b"(lp0\nI1\nag0\n\x86.");
    let t = doc.root().as_tuple().unwrap();
    let (a, b) = (t.get(0).unwrap(), t.get(1).unwrap());
    assert_eq!(a.node_id(), b.node_id());
    assert_eq!(a.len(), Some(1));
    // BINPUT / BINGET.
    let doc = read(b"]q\x05h\x05h\x05\x87.");
    let t = doc.root().as_tuple().unwrap();
    let ids: Vec<_> = t.iter().map(|v| v.node_id().unwrap()).collect();
    assert!(ids.iter().all(|&i| i == ids[0]));
    // LONG_BINPUT / LONG_BINGET, including a sparse huge key.
    let doc = read(b"}r\xff\xff\xff\xffj\xff\xff\xff\xff\x86.");
    let t = doc.root().as_tuple().unwrap();
    assert_eq!(t.get(0).unwrap().node_id(), t.get(1).unwrap().node_id());
    // MEMOIZE numbers entries from the memo size; a list built
    // incrementally (EMPTY_LIST MEMOIZE ... APPEND) after the memo entry.
    let doc = read(b"]\x94K\x05\x940\x8c\x01s\x940h\x01h\x02h\x02\x87a.");
    let l = doc.root().as_list().unwrap();
    let inner = l.get(0).unwrap().as_tuple().unwrap();
    assert_eq!(inner.get(0).unwrap().as_i64(), Some(5));
    assert!(inner.get(1).unwrap().same_object(&inner.get(2).unwrap()));
    assert_eq!(inner.get(2).unwrap().as_str(), Some("s"));
    // Sparse memo keys join the dense part once it reaches them; MEMOIZE
    // uses the number of keys set.
    let doc = read(b"(K\x07q\x02K\x08q\x00K\x09q\x01\x94h\x02h\x03h\x00t.");
    let t = doc.root().as_tuple().unwrap();
    let got: Vec<i64> = t.iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(got, [7, 8, 9, 7, 9, 8]);
    // A memoized dict referenced from many places keeps one node id.
    let doc = read(b"}\x94(\x8c\x04name\x94\x8c\x01f\x94u](h\x00h\x00h\x00e\x86.");
    let t = doc.root().as_tuple().unwrap();
    let d = t.get(0).unwrap();
    let l = t.get(1).unwrap().as_list().unwrap();
    assert!(l.iter().all(|v| v.node_id() == d.node_id()));
    assert!(doc.node_count() >= 3);
    assert!(d.node_id().unwrap().index() < doc.node_count());
}

#[test]
fn cycles_are_refused() {
    // l = []; l.append(l)
    assert_eq!(err(b"]\x94h\x00a."), PickleError::Cycle);
    assert_eq!(err(b"]\x94K\x05\x940h\x00h\x01\x86a."), PickleError::Cycle);
    // d = {}; d['d'] = d
    assert_eq!(err(b"}\x94\x8c\x01dh\x00s."), PickleError::Cycle);
}

#[test]
fn dict_key_semantics() {
    // A duplicated key keeps its first position and the last value.
    let doc = read(b"}(K\x01K\x02K\x01K\x03u.");
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d.get_int(1).and_then(|v| v.as_i64()), Some(3));
    // 1, True and 1.0 are one key; 'a' and b'a' are two.
    let doc = read(
        b"}(K\x01K\x01\x88K\x02G?\xf0\x00\x00\x00\x00\x00\x00K\x03\x8c\x01aK\x04C\x01aK\x05u.",
    );
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(d.get_int(1).and_then(|v| v.as_i64()), Some(3));
    assert_eq!(d.get("a").and_then(|v| v.as_i64()), Some(4));
    // Tuple keys compare by value, nested too.
    let doc = read(
        b"}(K\x01K\x02\x86K\x05K\x01K\x02\x86K\x06K\x01K\x02\x86\x85K\x07K\x01K\x02\x86\x85K\x08u.",
    );
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 2);
    let vals: Vec<i64> = d.values().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(vals, [6, 8]);
    // Unhashable keys.
    assert!(matches!(
        err(b"}]K\x01s."),
        PickleError::Unhashable {
            type_name: "list",
            opcode: "SETITEM",
            offset: 4
        }
    ));
    assert!(matches!(
        err(b"}(}K\x01u."),
        PickleError::Unhashable {
            type_name: "dict",
            ..
        }
    ));
    assert!(matches!(
        err(b"}(]\x85K\x01u."),
        PickleError::Unhashable {
            type_name: "tuple",
            ..
        }
    ));
    assert!(matches!(
        err(b"(]\x91."),
        PickleError::Unhashable {
            type_name: "list",
            ..
        }
    ));
    assert!(matches!(
        err(b"\x8f(\x8f\x90."),
        PickleError::Unhashable {
            type_name: "set",
            ..
        }
    ));
    // Frozensets are hashable.
    let doc = read(b"}((K\x01\x91K\x01(K\x01\x91K\x02u.");
    assert_eq!(doc.root().as_dict().map(|d| d.len()), Some(1));
}

/// A pickle of `{0: 0, 1: 1, ..., n-1: n-1}` plus `{'k0': 0, ...}`-style
/// string keys, with duplicates: exercises the hash index of large dicts.
#[test]
fn large_dicts_and_sets() {
    let n = 300i64;
    let mut b = b"}(".to_vec();
    for round in 0..2 {
        for i in 0..n {
            b.push(b'J');
            b.extend_from_slice(&(i as i32).to_le_bytes());
            b.push(b'J');
            b.extend_from_slice(&((i + round * 1000) as i32).to_le_bytes());
            let key = format!("k{i}");
            b.push(0x8c);
            b.push(key.len() as u8);
            b.extend_from_slice(key.as_bytes());
            b.push(b'J');
            b.extend_from_slice(&((i + round * 1000) as i32).to_le_bytes());
        }
    }
    b.extend_from_slice(b"u.");
    let doc = read(&b);
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 2 * n as usize);
    for i in 0..n {
        assert_eq!(d.get_int(i).and_then(|v| v.as_i64()), Some(i + 1000));
        assert_eq!(
            d.get(&format!("k{i}")).and_then(|v| v.as_i64()),
            Some(i + 1000)
        );
    }
    assert!(d.get("nope").is_none() && d.get_int(-1).is_none());
    // Key order is first insertion.
    assert_eq!(d.keys().next().and_then(|k| k.as_i64()), Some(0));
    // Sets with many elements, including tuples and floats.
    let mut b = b"\x8f(".to_vec();
    for i in 0..100u8 {
        b.extend_from_slice(&[b'K', i, b'K', i, 0x86, b'K', i]);
    }
    b.extend_from_slice(b"\x90(");
    for i in 0..100u8 {
        b.extend_from_slice(&[b'K', i, b'K', i, 0x86, b'G']);
        b.extend_from_slice(&f64::from(i).to_be_bytes());
    }
    b.extend_from_slice(b"\x90.");
    let doc = read(&b);
    assert_eq!(doc.root().as_set().map(|s| s.len()), Some(200));
    assert!(doc.root().as_set().unwrap().contains_int(99));
}

#[test]
fn globals_and_code_are_refused() {
    let e = err(b"\x80\x02cbuiltins\neval\n(S'1'\ntR.");
    assert_eq!(
        e,
        PickleError::Global {
            module: "builtins".into(),
            name: "eval".into(),
            offset: 2,
            opcode: "GLOBAL",
        }
    );
    assert_eq!(
        e.to_string(),
        "pickle references global 'builtins.eval' at byte 2 (GLOBAL): only plain data (dicts, lists, strings, numbers) is accepted"
    );
    // pickle.dumps(print, protocol=4)
    let e = err(b"\x80\x04\x95\x16\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x05print\x94\x93\x94.");
    assert!(
        matches!(&e, PickleError::Global { module, name, opcode: "STACK_GLOBAL", offset: 30 } if module == "builtins" && name == "print"),
        "{e}"
    );
    let e = err(b"(ios\nsystem\n.");
    assert!(matches!(&e, PickleError::Global { module, opcode: "INST", .. } if module == "os"));
    // Truncated GLOBAL still names what it can.
    let e = err(b"cos\nsys");
    assert!(
        matches!(&e, PickleError::Global { module, name, .. } if module == "os" && name == "?")
    );
    for (bytes, opcode, at) in [
        (&b"NNR."[..], "REDUCE", 2),
        (b"}}b.", "BUILD", 2),
        (b"(o.", "OBJ", 1),
        (b"NN\x81.", "NEWOBJ", 2),
        (b"NNN\x92.", "NEWOBJ_EX", 3),
        (b"P1\n.", "PERSID", 0),
        (b"NQ.", "BINPERSID", 1),
        (b"\x82\x01.", "EXT1", 0),
        (b"\x83\x01\x00.", "EXT2", 0),
        (b"\x84\x01\x00\x00\x00.", "EXT4", 0),
        (b"\x97.", "NEXT_BUFFER", 0),
        (b"N\x98.", "READONLY_BUFFER", 1),
    ] {
        let e = err(bytes);
        assert_eq!(e, PickleError::NotPlainData { opcode, offset: at });
        assert!(e.to_string().contains(opcode));
    }
}

#[test]
fn malformed_inputs() {
    assert_eq!(
        err(b"\xff."),
        PickleError::UnknownOpcode {
            byte: 0xff,
            offset: 0
        }
    );
    assert_eq!(
        err(b"N\x00"),
        PickleError::UnknownOpcode { byte: 0, offset: 1 }
    );
    assert!(err(b"\xff.").to_string().contains("0xff"));
    assert_eq!(
        err(b"\x80\x06N."),
        PickleError::UnsupportedProtocol {
            protocol: 6,
            offset: 0
        }
    );
    // Stack underflow: empty stack, and values hidden below a MARK.
    assert_eq!(
        err(b"."),
        PickleError::StackUnderflow {
            opcode: "STOP",
            offset: 0
        }
    );
    assert_eq!(
        err(b"K\x01(."),
        PickleError::StackUnderflow {
            opcode: "STOP",
            offset: 3
        }
    );
    assert!(matches!(
        err(b"a."),
        PickleError::StackUnderflow {
            opcode: "APPEND",
            ..
        }
    ));
    assert!(matches!(
        err(b"K\x01K\x02(\x86."),
        PickleError::StackUnderflow {
            opcode: "TUPLE2",
            ..
        }
    ));
    assert!(matches!(
        err(b"(e."),
        PickleError::StackUnderflow {
            opcode: "APPENDS",
            ..
        }
    ));
    assert!(matches!(
        err(b"2."),
        PickleError::StackUnderflow { opcode: "DUP", .. }
    ));
    assert!(matches!(
        err(b"0."),
        PickleError::StackUnderflow { opcode: "POP", .. }
    ));
    assert!(matches!(
        err(b"\x94."),
        PickleError::StackUnderflow {
            opcode: "MEMOIZE",
            ..
        }
    ));
    // MARK mismatch.
    for (bytes, opcode) in [
        (&b"]K\x01e."[..], "APPENDS"),
        (b"}K\x01K\x01u.", "SETITEMS"),
        (b"K\x01t.", "TUPLE"),
        (b"l.", "LIST"),
        (b"d.", "DICT"),
        (b"1.", "POP_MARK"),
        (b"\x91.", "FROZENSET"),
        (b"\x8f\x90.", "ADDITEMS"),
    ] {
        let e = err(bytes);
        assert!(
            matches!(e, PickleError::MarkMismatch { opcode: o, .. } if o == opcode),
            "{opcode}: {e}"
        );
        assert!(e.to_string().contains("MARK"));
    }
    // Memo key missing.
    assert_eq!(
        err(b"h\x03."),
        PickleError::MemoKeyMissing {
            key: 3,
            opcode: "BINGET",
            offset: 0
        }
    );
    assert!(matches!(
        err(b"j\x00\x00\x01\x00."),
        PickleError::MemoKeyMissing { key: 65536, .. }
    ));
    assert!(matches!(
        err(b"g7\n."),
        PickleError::MemoKeyMissing {
            key: 7,
            opcode: "GET",
            ..
        }
    ));
    assert!(matches!(
        err(b"Np-1\n."),
        PickleError::InvalidArgument { opcode: "PUT", .. }
    ));
    // Wrong types.
    assert!(matches!(
        err(b"}K\x01a."),
        PickleError::WrongType {
            opcode: "APPEND",
            expected: "list",
            found: "dict",
            ..
        }
    ));
    assert!(matches!(
        err(b"](K\x01K\x02u."),
        PickleError::WrongType {
            opcode: "SETITEMS",
            expected: "dict",
            found: "list",
            ..
        }
    ));
    assert!(matches!(
        err(b"K\x01(K\x01K\x02u."),
        PickleError::WrongType { found: "int", .. }
    ));
    assert!(matches!(
        err(b"\x8f(K\x01K\x02\x91(\x90."),
        PickleError::WrongType {
            opcode: "ADDITEMS",
            expected: "set",
            found: "frozenset",
            ..
        }
    ));
    assert!(matches!(
        err(b"(K\x01K\x02\x91(K\x03\x90."),
        PickleError::WrongType {
            opcode: "ADDITEMS",
            found: "frozenset",
            ..
        }
    ));
    // Odd SETITEMS / DICT.
    assert!(matches!(
        err(b"}(K\x01u."),
        PickleError::InvalidArgument {
            opcode: "SETITEMS",
            ..
        }
    ));
    assert!(matches!(
        err(b"(K\x01d."),
        PickleError::InvalidArgument { opcode: "DICT", .. }
    ));
    // Bad text arguments.
    assert!(matches!(
        err(b"Ix\n."),
        PickleError::InvalidArgument { opcode: "INT", .. }
    ));
    assert!(matches!(
        err(b"F1.2.3\n."),
        PickleError::InvalidArgument {
            opcode: "FLOAT",
            ..
        }
    ));
    assert!(matches!(
        err(b"V\\u12\n."),
        PickleError::InvalidArgument {
            opcode: "UNICODE",
            ..
        }
    ));
    let long_digits = format!("I{}\n.", "9".repeat(5000));
    assert!(matches!(
        err(long_digits.as_bytes()),
        PickleError::InvalidArgument { .. }
    ));
    // Negative lengths.
    assert!(matches!(
        err(b"T\xff\xff\xff\xff."),
        PickleError::InvalidArgument {
            opcode: "BINSTRING",
            ..
        }
    ));
    assert!(matches!(
        err(b"\x8b\xff\xff\xff\xff."),
        PickleError::InvalidArgument {
            opcode: "LONG4",
            ..
        }
    ));
    // No STOP.
    assert_eq!(
        err(b"N"),
        PickleError::Truncated {
            offset: 1,
            opcode: "next opcode (no STOP)"
        }
    );
    assert!(matches!(err(b""), PickleError::Truncated { offset: 0, .. }));
}

#[test]
fn huge_length_prefixes_do_not_allocate() {
    // Each claims gigabytes (or exabytes) that are not there: the reader
    // must report truncation without trying to allocate that much.
    for (bytes, opcode) in [
        (&b"X\xff\xff\xff\xffabc"[..], "BINUNICODE"),
        (b"\x8d\xff\xff\xff\xff\xff\xff\xff\xffabc", "BINUNICODE8"),
        (b"\x8e\xff\xff\xff\xff\xff\xff\xff\x7fabc", "BINBYTES8"),
        (b"\x96\x00\x00\x00\x00\x00\x00\x00\x01abc", "BYTEARRAY8"),
        (b"B\xff\xff\xff\xffab", "BINBYTES"),
        (b"T\xff\xff\xff\x7fab", "BINSTRING"),
        (b"\x8b\xff\xff\xff\x7fab", "LONG4"),
        (b"\x95\xff\xff\xff\xff\xff\xff\xff\xffN.", "FRAME"),
    ] {
        assert_eq!(
            err(bytes),
            PickleError::Truncated { offset: 0, opcode },
            "{opcode}"
        );
        assert_stream_equal(bytes, &ReadOptions::default());
    }
    // A huge memo key goes to the sparse memo.
    let doc = read(b"Np4000000000\ng4000000000\n\x86.");
    assert_eq!(doc.root().len(), Some(2));
    // Input size limit.
    let opts = ReadOptions {
        max_input_len: 3,
        ..ReadOptions::default()
    };
    assert!(matches!(
        PickleDoc::from_slice_with(b"K\x01K\x02\x86.", &opts),
        Err(PickleError::LimitExceeded {
            what: "input size",
            limit: 3,
            ..
        })
    ));
    // A stream is refused once the bytes it needs pass the limit.
    assert_stream_equal(b"K\x01K\x02\x86.", &opts);
    let one = ReadOptions {
        max_input_len: 1,
        ..ReadOptions::default()
    };
    assert!(matches!(
        read_streamed(b"N.", &one),
        Err(PickleError::LimitExceeded { limit: 1, .. })
    ));
}

#[test]
fn deep_nesting_without_recursion() {
    // 200,000 nested lists: EMPTY_LIST * n, then APPEND * n-1.
    let n = 200_000;
    let mut b = vec![b']'; n];
    b.extend(std::iter::repeat_n(b'a', n - 1));
    b.push(b'.');
    let e = err(&b);
    assert!(
        matches!(
            e,
            PickleError::LimitExceeded {
                what: "nesting depth",
                limit: 1000,
                ..
            }
        ),
        "{e}"
    );
    // Allowed when the limit says so; walking it is still iterative.
    let opts = ReadOptions {
        max_depth: n,
        ..ReadOptions::default()
    };
    let doc = PickleDoc::from_slice_with(&b, &opts).expect("deep list");
    let mut v = doc.root();
    let mut depth = 1;
    while let Some(inner) = v.index(0) {
        v = inner;
        depth += 1;
    }
    assert_eq!(depth, n);
    let opts = ReadOptions {
        max_depth: n - 1,
        ..ReadOptions::default()
    };
    assert!(PickleDoc::from_slice_with(&b, &opts).is_err());
    // Deep nesting through shared nodes: a short path first, then a
    // longer path to the same subtree must still count the full depth.
    // x = [[[]]]; root = (x, [[x]])  -> depth 1 + 2 + 3 = 6.
    let b = b"]\x94]\x94]\x94aah\x00]]h\x00aa\x86.";
    let depth_ok = |max_depth| {
        PickleDoc::from_slice_with(
            b,
            &ReadOptions {
                max_depth,
                ..ReadOptions::default()
            },
        )
        .is_ok()
    };
    assert!(depth_ok(6));
    assert!(!depth_ok(5));
    // Deeply nested tuples used as dict keys hash without recursion.
    let n = 100_000;
    let mut b = b"}K\x00".to_vec();
    b.extend(std::iter::repeat_n(0x85u8, n));
    b.extend_from_slice(b"N");
    b.extend_from_slice(b"K\x00");
    b.extend(std::iter::repeat_n(0x85u8, n));
    b.extend_from_slice(b"K\x01s.");
    // (second pair is pushed after SETITEM of the first? no: build one
    // dict with SETITEMS of two equal deep-tuple keys instead)
    let mut b2 = b"}(K\x00".to_vec();
    b2.extend(std::iter::repeat_n(0x85u8, n));
    b2.push(b'N');
    b2.extend_from_slice(b"K\x00");
    b2.extend(std::iter::repeat_n(0x85u8, n));
    b2.extend_from_slice(b"K\x01u.");
    let opts = ReadOptions {
        max_depth: n + 1,
        ..ReadOptions::default()
    };
    let doc = PickleDoc::from_slice_with(&b2, &opts).expect("deep tuple keys");
    let d = doc.root().as_dict().unwrap();
    assert_eq!(d.len(), 1, "equal deep tuples are one key");
    assert_eq!(d.values().next().and_then(|v| v.as_i64()), Some(1));
    // The first form is malformed (SETITEM leaves a value behind) but must
    // not panic either.
    let _ = PickleDoc::from_slice_with(&b, &opts);
}

/// Every proper prefix of a valid pickle must fail with `Truncated`,
/// never panic.
#[test]
fn truncation_at_every_prefix() {
    let written = PickleWriter::new().to_vec(&sample_value());
    for full in [SMALL_P0, SMALL_P1, SMALL_P2, SMALL_P5, &written[..]] {
        read(full);
        for n in 0..=full.len() {
            assert_stream_equal(&full[..n], &ReadOptions::default());
        }
        for n in 0..full.len() {
            match PickleDoc::from_slice(&full[..n]) {
                Err(PickleError::Truncated { offset, opcode }) => {
                    assert!(offset <= n, "offset {offset} beyond prefix {n}");
                    assert!(!opcode.is_empty());
                }
                other => panic!("prefix {n} of {}: {other:?}", full.len()),
            }
        }
    }
    let e = err(b"\x8c\x05ab");
    assert_eq!(
        e.to_string(),
        "pickle truncated at byte 0 while reading SHORT_BINUNICODE"
    );
}

/// Deterministic mutation fuzzing: no input may panic.
#[test]
fn mutated_inputs_never_panic() {
    let written = PickleWriter::new().to_vec(&sample_value());
    let seeds: [&[u8]; 5] = [SMALL_P0, SMALL_P1, SMALL_P2, SMALL_P5, &written];
    let mut rnd = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d);
    let mut ok = 0;
    for round in 0..20_000 {
        let seed = seeds[round % seeds.len()];
        let mut b = seed.to_vec();
        for _ in 0..1 + rnd() % 4 {
            let i = (rnd() as usize) % b.len();
            match rnd() % 4 {
                0 => b[i] = rnd() as u8,
                1 => b[i] ^= 1 << (rnd() % 8),
                2 => {
                    b.remove(i);
                }
                _ => b.insert(i, rnd() as u8),
            }
            if b.is_empty() {
                break;
            }
        }
        let fast = PickleDoc::from_slice(&b);
        let full = super::reader::parse(&b, &ReadOptions::default(), true);
        assert_eq!(fast.as_ref().err(), full.as_ref().err(), "{b:?}");
        assert_stream_equal(&b, &ReadOptions::default());
        if let Ok(doc) = fast {
            ok += 1;
            // Walking and converting a document never panics either.
            let _ = doc.root().to_value();
            let _ = format!("{:?}", doc);
        }
    }
    assert!(ok > 0);
}

/// Random programs of container opcodes with memo references (which can
/// make shared, deep and cyclic structures): the incremental depth check
/// and the full walk must agree.
#[test]
fn depth_and_cycle_checks_agree() {
    let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15);
    let mut rnd = move |n: u64| next() % n;
    let opts = ReadOptions {
        max_depth: 3,
        ..ReadOptions::default()
    };
    let (mut ok, mut cycles, mut deep) = (0, 0, 0);
    for _ in 0..20_000 {
        // Track the stack's kinds (b'L' list, b'D' dict, b'T' tuple,
        // b'I' int) so that most programs are valid.
        let mut b = Vec::new();
        let mut memo: Vec<u8> = Vec::new();
        let mut stack: Vec<u8> = Vec::new();
        for _ in 0..1 + rnd(40) {
            let n = stack.len();
            match rnd(8) {
                0 | 1 => {
                    let kind = if rnd(2) == 0 { b'L' } else { b'D' };
                    b.extend_from_slice(&[if kind == b'L' { b']' } else { b'}' }, 0x94]);
                    memo.push(kind);
                    stack.push(kind);
                }
                2 | 3 if !memo.is_empty() => {
                    let i = rnd(memo.len() as u64) as usize;
                    b.extend_from_slice(&[b'h', i as u8]);
                    stack.push(memo[i]);
                }
                4 | 5 if n >= 2 && stack[n - 2] == b'L' => {
                    b.push(b'a');
                    stack.pop();
                }
                6 if n >= 1 && stack[n - 1] == b'D' && !memo.is_empty() => {
                    let i = rnd(memo.len() as u64) as usize;
                    b.extend_from_slice(&[b'K', rnd(3) as u8, b'h', i as u8, b's']);
                }
                7 if n >= 2 => {
                    b.push(0x86);
                    stack.truncate(n - 2);
                    stack.push(b'T');
                }
                _ => {
                    b.extend_from_slice(&[b'K', 1]);
                    stack.push(b'I');
                }
            }
        }
        if !memo.is_empty() && rnd(2) == 0 {
            // Return the first container, which most APPENDs fill.
            b.extend_from_slice(b"h\x00");
        }
        b.push(b'.');
        let fast = PickleDoc::from_slice_with(&b, &opts);
        let full = super::reader::parse(&b, &opts, true);
        assert_eq!(fast.as_ref().err(), full.as_ref().err(), "{b:?}");
        match fast {
            Ok(_) => ok += 1,
            Err(PickleError::Cycle) => cycles += 1,
            Err(PickleError::LimitExceeded { .. }) => deep += 1,
            Err(_) => {}
        }
    }
    println!("{ok} valid, {cycles} cyclic, {deep} too deep");
    assert!(ok > 100 && cycles > 10 && deep > 10, "{ok} {cycles} {deep}");
}

fn sample_value() -> Value {
    let frame = Value::dict([
        ("name", Value::from("forward")),
        ("filename", Value::from("/src/model.py")),
        ("line", Value::from(42)),
    ]);
    let frames = Value::list([frame.clone(), frame.clone()]);
    Value::dict([
        ("none", Value::None),
        ("t", Value::from(true)),
        ("f", Value::from(false)),
        ("small", Value::from(7u8)),
        ("u16", Value::from(60000u32)),
        ("neg", Value::from(-5)),
        ("i32", Value::from(-2_000_000_000i64)),
        ("addr", Value::from(139_637_976_727_552u64)),
        ("u64max", Value::from(u64::MAX)),
        ("i64min", Value::from(i64::MIN)),
        ("big", Value::from(-(1i128 << 100))),
        ("float", Value::from(0.25)),
        ("str", Value::from("héllo")),
        ("long_str", Value::from("x".repeat(300))),
        ("bytes", Value::bytes(&b"\x00\x01"[..])),
        ("empty_t", Value::tuple(Vec::<Value>::new())),
        ("t1", Value::tuple([1])),
        ("t3", Value::tuple([1, 2, 3])),
        ("t5", Value::tuple([1, 2, 3, 4, 5])),
        ("set", Value::set([1, 2])),
        ("fset", Value::frozenset(["a"])),
        ("frames_a", frames.clone()),
        ("frames_b", frames),
        ("frame", frame),
        ("opt", Value::from(None::<i64>)),
        (
            "nested",
            Value::list([Value::list([Value::list(Vec::<Value>::new())])]),
        ),
    ])
}

#[test]
fn writer_round_trip() {
    let v = sample_value();
    let bytes = PickleWriter::new().to_vec(&v);
    assert_eq!(&bytes[..2], b"\x80\x04");
    assert_eq!(bytes[2], 0x95, "framed");
    let doc = read(&bytes);
    let root = doc.root();
    assert_eq!(root.to_value(), v);
    assert_eq!(root.get("u64max").and_then(|x| x.as_u64()), Some(u64::MAX));
    assert_eq!(root.get("i64min").and_then(|x| x.as_i64()), Some(i64::MIN));
    assert_eq!(
        root.get("addr").and_then(|x| x.as_u64()),
        Some(139_637_976_727_552)
    );
    assert_eq!(
        root.get("big").and_then(|x| x.as_i128()),
        Some(-(1i128 << 100))
    );
    assert_eq!(root.get("str").and_then(|x| x.as_str()), Some("héllo"));
    assert!(root.get("opt").is_some_and(|x| x.is_none()));
    // Shared containers are written once and stay shared.
    let fa = root.get("frames_a").unwrap();
    let fb = root.get("frames_b").unwrap();
    assert_eq!(fa.node_id(), fb.node_id());
    let fr = root.get("frame").unwrap();
    let fa = fa.as_list().unwrap();
    assert!(fa.iter().all(|x| x.node_id() == fr.node_id()));
    assert_eq!(fr.get("line").and_then(|x| x.as_i64()), Some(42));
    // Repeated strings are memoized: "forward" is written once.
    let count = |needle: &[u8]| bytes.windows(needle.len()).filter(|w| *w == needle).count();
    assert_eq!(count(b"forward"), 1);
    assert_eq!(count(b"/src/model.py"), 1);
    // Scalars as the root.
    for v in [
        Value::None,
        Value::from(1),
        Value::from("s"),
        Value::from(1.5),
    ] {
        assert_eq!(read(&PickleWriter::new().to_vec(&v)).root().to_value(), v);
    }
}

#[test]
fn writer_uses_only_memoryviz_opcodes_for_snapshot_data() {
    // Opcodes supported by PyTorch's MemoryViz.js unpickler.
    const JS: &[u8] = b"e h J K M } ] \x95 \x8a j ( \x94 \x80 u \x8c . \x86 a \x89 q X ) \x88 N G t \x85 \x87 r l d s";
    let frame = Value::dict([("name", Value::from("f")), ("line", Value::from(3))]);
    let big_list: Vec<Value> = (0..2500i64).map(|i| Value::from(i * 1_000_003)).collect();
    let v = Value::dict([
        (
            "segments",
            Value::list([Value::dict([("address", Value::from(1u64 << 40))])]),
        ),
        (
            "device_traces",
            Value::list([Value::list([frame.clone(), frame])]),
        ),
        ("pool", Value::tuple([0, 0])),
        ("many", Value::from(big_list)),
        ("f", Value::from(-0.5)),
        ("t", Value::from(true)),
        ("none", Value::None),
        ("long", Value::from("y".repeat(70_000))),
        ("k1", Value::from(1)),
    ]);
    let bytes = PickleWriter::new().to_vec(&v);
    // Walk the opcodes (the reader's view of them) and check each.
    let doc = read(&bytes);
    assert_eq!(doc.root().to_value(), v);
    let mut pos = 0;
    let mut frames = 0;
    while pos < bytes.len() {
        let code = bytes[pos];
        assert!(JS.contains(&code), "opcode {code:#x} at {pos}");
        pos += 1 + match code {
            0x80 | b'K' | b'h' | b'q' => 1,
            b'M' => 2,
            b'J' | b'j' | b'r' => 4,
            b'G' => 8,
            0x95 => {
                frames += 1;
                8
            }
            0x8a => 1 + bytes[pos + 1] as usize,
            0x8c => 1 + bytes[pos + 1] as usize,
            b'X' => 4 + u32::from_le_bytes(bytes[pos + 1..pos + 5].try_into().unwrap()) as usize,
            _ => 0,
        };
    }
    assert!(frames >= 2, "a large pickle is split into frames");
}

#[test]
fn writer_is_iterative_and_batches() {
    // A 100,000-deep list writes without recursion (the reader needs a
    // raised depth limit to read it back).
    let mut v = Value::list(Vec::<Value>::new());
    for _ in 0..100_000 {
        v = Value::list([v]);
    }
    let bytes = PickleWriter::new().to_vec(&v);
    let opts = ReadOptions {
        max_depth: 200_000,
        ..ReadOptions::default()
    };
    let doc = PickleDoc::from_slice_with(&bytes, &opts).unwrap();
    assert_eq!(doc.node_count(), 100_001);
    // Unwind without recursive drops.
    let mut cur = Some(v);
    while let Some(Value::List(l)) = cur.take() {
        cur = Arc::try_unwrap(l).ok().and_then(|mut items| items.pop());
    }
    // Lists and dicts longer than a batch.
    let v = Value::dict((0..2500).map(|i| (Value::from(i), Value::list(0..i % 3))));
    let bytes = PickleWriter::new().to_vec(&v);
    let doc = read(&bytes);
    assert_eq!(doc.root().to_value(), v);
    assert_eq!(doc.root().len(), Some(2500));
}

#[test]
fn value_api() {
    let v = DictBuilder::with_capacity(2)
        .entry("a", 1)
        .entry("a", 2)
        .entry("s", "x")
        .build();
    assert_eq!(v.get("a").and_then(Value::as_i64), Some(2), "last wins");
    assert_eq!(v.get("s").and_then(Value::as_str), Some("x"));
    assert_eq!(v.type_name(), "dict");
    assert_eq!(Value::from(u64::MAX).as_u64(), Some(u64::MAX));
    assert_eq!(Value::from(u64::MAX).type_name(), "int");
    assert_eq!(Value::from(2.5f32).as_f64(), Some(2.5));
    assert_eq!(Value::from(3).as_f64(), Some(3.0));
    assert!(Value::from(()).is_none());
    assert_eq!(Value::from(true).as_bool(), Some(true));
    assert_eq!(Value::bytes(vec![1u8]).as_bytes(), Some(&[1u8][..]));
    assert_eq!(Value::list([1, 2]).as_list().map(<[Value]>::len), Some(2));
    assert_eq!(Value::tuple([1, 2]).as_seq().map(<[Value]>::len), Some(2));
    let shared = Value::list([1]);
    let a = Value::list([shared.clone(), shared.clone()]);
    let items = a.as_list().unwrap();
    assert_eq!(items[0].container_ptr(), items[1].container_ptr());
    assert_ne!(Value::from(1), Value::from(1.0));
    assert_eq!(Value::from(5), Value::BigInt(BigInt::from(5i64)));
    assert_eq!(Value::from(BigInt::from(5i64)).as_i64(), Some(5));
    assert_ne!(Value::list([1]), Value::list([1, 2]));
    assert_ne!(Value::dict([("a", 1)]), Value::dict([("a", 2)]));
    assert!(format!("{:?}", a).starts_with("<list len 2"));
}

// ---- real snapshots ----

fn real_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/real")
}

/// (file, device 0 trace entries, segments, frame references in the
/// traces, distinct frame objects), from CPython's pickle.load.
const REAL_FACTS: &[(&str, usize, usize, usize, usize)] = &[
    (
        "cs336-medium-ctx1024-infer.torch2.11.pickle",
        3840,
        108,
        240_748,
        302,
    ),
    (
        "cs336-medium-ctx128-infer.torch2.11.pickle",
        3840,
        98,
        240_748,
        302,
    ),
    (
        "cs336-medium-ctx128-train.torch2.11.pickle",
        19136,
        377,
        607_330,
        629,
    ),
    (
        "cs336-medium-ctx512-train.torch2.11.pickle",
        22332,
        400,
        711_179,
        665,
    ),
    (
        "cs336-small-ctx100-fwdbwd.torch2.6.pickle",
        11300,
        65,
        407_378,
        682,
    ),
    (
        "cs336-small-ctx200-fwd.torch2.6.pickle",
        2321,
        48,
        154_096,
        417,
    ),
    (
        "cs336-small-ctx200-fwdbwd-amp.torch2.6.pickle",
        12976,
        88,
        472_526,
        713,
    ),
    (
        "opt-zeroth-order-finetune.torch2.9.pickle",
        23105,
        61,
        251_168,
        175,
    ),
];

#[test]
#[ignore = "needs ../shared/traces/real (real PyTorch snapshots, not in the repository); .ci/run runs it with --ignored when the folder is there"]
fn real_snapshots() {
    let dir = real_dir();
    assert!(
        dir.is_dir(),
        "{} not found: this test reads the real snapshots there",
        dir.display()
    );
    for &(name, trace_len, segments, frame_refs, distinct_frames) in REAL_FACTS {
        let path = dir.join(name);
        let Ok(bytes) = std::fs::read(&path) else {
            println!("SKIPPED {name}: not readable");
            continue;
        };
        let doc = PickleDoc::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(doc.protocol(), Some(4));
        assert_eq!(doc.bytes_read(), bytes.len());
        let root = doc.root();
        let keys: Vec<&str> = root
            .as_dict()
            .unwrap()
            .keys()
            .filter_map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "segments",
                "device_traces",
                "allocator_settings",
                "external_annotations"
            ],
            "{name}"
        );
        let traces = root.get("device_traces").and_then(|v| v.as_list()).unwrap();
        let dev0 = traces.get(0).and_then(|v| v.as_list()).unwrap();
        assert_eq!(dev0.len(), trace_len, "{name}");
        assert_eq!(
            root.get("segments").and_then(|v| v.len()),
            Some(segments),
            "{name}"
        );
        let settings = root.get("allocator_settings").unwrap();
        assert_eq!(
            settings.get("max_split_size").and_then(|v| v.as_i64()),
            Some(-1)
        );
        assert_eq!(
            settings
                .get("expandable_segments")
                .and_then(|v| v.as_bool()),
            Some(false)
        );
        let mut refs = 0;
        let mut seen = vec![false; doc.node_count()];
        let mut distinct = 0;
        for e in dev0.iter() {
            assert!(e.get("action").and_then(|a| a.as_str()).is_some());
            assert!(e.get("addr").and_then(|a| a.as_u64()).is_some());
            assert!(e.get("size").and_then(|a| a.as_u64()).is_some());
            for f in e.get("frames").and_then(|f| f.as_list()).unwrap().iter() {
                refs += 1;
                let id = f.node_id().unwrap().index();
                if !seen[id] {
                    seen[id] = true;
                    distinct += 1;
                    assert!(f.get("name").and_then(|n| n.as_str()).is_some());
                    assert!(f.get("line").and_then(|n| n.as_i64()).is_some());
                }
            }
        }
        assert_eq!((refs, distinct), (frame_refs, distinct_frames), "{name}");
        // Writer round trip: same data, shared frames, similar size.
        let value = root.to_value();
        let out = PickleWriter::new().to_vec(&value);
        let doc2 = read(&out);
        assert_eq!(doc2.root().to_value(), value, "{name}");
        assert!(
            out.len() <= bytes.len() + bytes.len() / 10,
            "{name}: {} bytes written for {} read",
            out.len(),
            bytes.len()
        );
        println!(
            "{name}: read {} bytes, wrote {} bytes",
            bytes.len(),
            out.len()
        );
    }
    assert_eq!(
        read(&std::fs::read(dir.join("cs336-small-ctx200-fwd.torch2.6.pickle")).unwrap())
            .root()
            .get("device_traces")
            .and_then(|t| t.index(0))
            .and_then(|t| t.len()),
        Some(2321)
    );
}
