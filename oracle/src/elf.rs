//! Rewriting the soname of a 64-bit little-endian ELF shared library in
//! place, for a new soname of the same length (`libcudart.so.13` →
//! `libcudart.so.12`).

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

const SHT_DYNAMIC: u32 = 6;
const DT_NULL: u64 = 0;
const DT_SONAME: u64 = 14;

/// Where the soname string lies in the file: (offset, length without the
/// terminating NUL).
fn soname_span(b: &[u8]) -> Option<(usize, usize)> {
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None; // not ELF64 little-endian
    }
    let shoff = u64_at(b, 0x28)? as usize;
    let shentsize = u16_at(b, 0x3a)? as usize;
    let shnum = u16_at(b, 0x3c)? as usize;
    let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    for i in 0..shnum {
        let s = section(i)?;
        if u32_at(b, s + 4)? != SHT_DYNAMIC {
            continue;
        }
        let dyn_off = u64_at(b, s + 0x18)? as usize;
        let dyn_size = u64_at(b, s + 0x20)? as usize;
        let strtab = section(u32_at(b, s + 0x28)? as usize)?;
        let str_off = u64_at(b, strtab + 0x18)? as usize;
        for e in (dyn_off..dyn_off + dyn_size).step_by(16) {
            match u64_at(b, e)? {
                DT_NULL => return None,
                DT_SONAME => {
                    let start = str_off.checked_add(u64_at(b, e + 8)? as usize)?;
                    let len = b.get(start..)?.iter().position(|&c| c == 0)?;
                    return Some((start, len));
                }
                _ => {}
            }
        }
    }
    None
}

/// The soname of the library in `b`.
pub(crate) fn soname(b: &[u8]) -> Option<&[u8]> {
    soname_span(b).and_then(|(s, n)| b.get(s..s + n))
}

/// Replaces the soname with `new` (same length). `Err` says why not.
pub(crate) fn patch_soname(b: &mut [u8], new: &str) -> Result<(), String> {
    let (start, len) =
        soname_span(b).ok_or("no soname found (not a 64-bit ELF shared library?)")?;
    if new.len() != len {
        return Err(format!(
            "the new soname {new} has {} bytes, the library's has {len}",
            new.len()
        ));
    }
    b[start..start + len].copy_from_slice(new.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_elf() {
        let mut b = b"not an elf file at all".to_vec();
        assert!(soname(&b).is_none());
        assert!(patch_soname(&mut b, "libcudart.so.12").is_err());
    }
}
